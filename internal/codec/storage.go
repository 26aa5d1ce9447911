package codec

import (
	"bytes"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EncodeStorage returns the bytes stored for obj, an object of its kind's
// storage version: kube-apiserver's storage encoding, the protobuf
// envelope ("k8s\x00" + runtime.Unknown) for types with a protobuf
// encoding and JSON for the others, with apiVersion and kind set and
// metadata.resourceVersion left out, since the store's revision is the
// resourceVersion. The buffer is new: the caller may give it to the
// store's Put, which keeps it.
func (c *Codecs) EncodeStorage(obj runtime.Object) ([]byte, error) {
	if m, ok := obj.(sizedMarshaler); ok {
		return c.encodeStorageProto(obj, m)
	}
	typed, err := c.WithTypeMeta(obj)
	if err != nil {
		return nil, err
	}
	if typed, err = withoutResourceVersion(typed); err != nil {
		return nil, err
	}
	s := c.jsonStorage
	if _, ok := typed.(protoMarshaler); ok {
		s = c.protoStorage
	}
	var buf bytes.Buffer
	if err := s.Encode(typed, &buf); err != nil {
		return nil, err
	}
	if s == c.jsonStorage {
		// The JSON serializer ends with a newline, which is not part of
		// the object.
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	}
	return buf.Bytes(), nil
}

// DecodeStorage decodes stored bytes into into and sets its
// resourceVersion to rev. The result has apiVersion and kind set.
func (c *Codecs) DecodeStorage(data []byte, rev int64, into runtime.Object) error {
	done, err := c.decodeStorageProto(data, into)
	if !done {
		s := c.jsonStorage
		if bytes.HasPrefix(data, protobufPrefix) {
			s = c.protoStorage
		}
		var obj runtime.Object
		obj, _, err = s.Decode(data, nil, into)
		if err == nil && obj != into {
			return fmt.Errorf("codec: stored object is a %T, want %T", obj, into)
		}
	}
	if err != nil {
		return fmt.Errorf("codec: decoding stored object: %w", err)
	}
	m, err := meta.Accessor(into)
	if err != nil {
		return err
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// sizedMarshaler is implemented by every k8s.io/api type: its generated
// protobuf encoding.
type sizedMarshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// encodeStorageProto is EncodeStorage for a type with a protobuf
// encoding: the bytes the protobuf serializer writes, in one allocation
// and without setting apiVersion and kind on a copy of obj (the envelope
// carries them). A renewal encodes its lease once or twice; through the
// serializer that took two copies of the object and three buffers.
// TestEncodeStorage compares the two.
func (c *Codecs) encodeStorageProto(obj runtime.Object, m sizedMarshaler) ([]byte, error) {
	gvk, err := c.kindOf(obj)
	if err != nil {
		return nil, err
	}
	if obj, err = withoutResourceVersion(obj); err != nil {
		return nil, err
	}
	return marshalEnveloped(gvk, obj.(sizedMarshaler))
}

// marshalEnveloped returns m's protobuf encoding in the envelope of kind
// gvk, encoded in place: one allocation, no copy.
func marshalEnveloped(gvk schema.GroupVersionKind, m sizedMarshaler) ([]byte, error) {
	n := m.Size()
	apiVersion := gvk.GroupVersion().String()
	dst := make([]byte, 0, n+len(apiVersion)+len(gvk.Kind)+48)
	dst = appendEnvelopeHead(dst, gvk, n)
	dst = dst[:len(dst)+n]
	if _, err := m.MarshalToSizedBuffer(dst[len(dst)-n:]); err != nil {
		return nil, err
	}
	return appendEnvelopeTail(dst), nil
}

// withoutResourceVersion returns obj, or a shallow copy of it with
// metadata.resourceVersion cleared. Clearing it in obj would write to a
// shared object (often the watch cache's); a shallow copy has its own
// ObjectMeta, since every API type embeds it by value.
func withoutResourceVersion(obj runtime.Object) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if m.GetResourceVersion() == "" {
		return obj, nil
	}
	if obj, err = shallowCopy(obj); err != nil {
		return nil, err
	}
	m, _ = meta.Accessor(obj)
	m.SetResourceVersion("")
	return obj, nil
}

// AfterMetadata returns what follows an object's metadata in its
// protobuf storage encoding (the object's other fields and the envelope's
// end), and false when data is not such an encoding or its object does not
// begin with its metadata (as every generated API type's does). Two
// encodings whose ends differ stay different whatever is changed inside
// their metadata.
func AfterMetadata(data []byte) ([]byte, bool) {
	env, ok := splitEnvelope(data)
	if !ok {
		return nil, false
	}
	meta, at, ok := leadingMetadata(env.raw)
	if !ok {
		return nil, false
	}
	return data[env.rawAt+at+len(meta):], true
}

// leadingMetadata returns the fields of an object message's metadata
// (field 1, which every generated API type's encoding begins with), and
// where in msg they begin.
func leadingMetadata(msg []byte) (meta []byte, at int, ok bool) {
	num, typ, n := protowire.ConsumeTag(msg)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return nil, 0, false
	}
	meta, m := protowire.ConsumeBytes(msg[n:])
	if m < 0 {
		return nil, 0, false
	}
	return meta, n + m - len(meta), true
}

// envelope is a protobuf storage encoding taken apart: the runtime.Unknown
// after the "k8s\x00" prefix.
type envelope struct {
	apiVersion, kind []byte
	raw              []byte // the object's own encoding
	rawAt            int    // where raw begins in the encoding
}

// splitEnvelope takes a protobuf storage encoding apart, and says false
// when data is not one, has fields runtime.Unknown does not, or declares a
// content encoding or type (which no stored object has).
func splitEnvelope(data []byte) (env envelope, ok bool) {
	msg, ok := bytes.CutPrefix(data, protobufPrefix)
	if !ok {
		return envelope{}, false
	}
	var haveRaw bool
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 || typ != protowire.BytesType {
			return envelope{}, false
		}
		v, m := protowire.ConsumeBytes(msg[n:])
		if m < 0 {
			return envelope{}, false
		}
		switch num {
		case 1: // typeMeta
			if env.apiVersion, env.kind, ok = splitTypeMeta(v); !ok {
				return envelope{}, false
			}
		case 2: // raw
			env.raw, haveRaw = v, true
			env.rawAt = len(data) - len(msg) + n + (m - len(v))
		case 3, 4: // contentEncoding, contentType
			if len(v) > 0 {
				return envelope{}, false
			}
		default:
			return envelope{}, false
		}
		msg = msg[n+m:]
	}
	return env, haveRaw
}

// splitTypeMeta reads runtime.TypeMeta's apiVersion (1) and kind (2).
func splitTypeMeta(msg []byte) (apiVersion, kind []byte, ok bool) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 || typ != protowire.BytesType {
			return nil, nil, false
		}
		v, m := protowire.ConsumeBytes(msg[n:])
		if m < 0 {
			return nil, nil, false
		}
		switch num {
		case 1:
			apiVersion = v
		case 2:
			kind = v
		default:
			return nil, nil, false
		}
		msg = msg[n+m:]
	}
	return apiVersion, kind, true
}

// protoUnmarshaler is implemented by every k8s.io/api type: its generated
// protobuf decoding.
type protoUnmarshaler interface {
	Reset()
	Unmarshal([]byte) error
}

// decodeStorageProto is DecodeStorage's protobuf decoding for an object of
// a generated type, without the serializer's copy of the object's bytes
// (runtime.Unknown.Unmarshal copies raw): it decodes the object where it
// lies in data. It reports false, having done nothing, when the serializer
// must decide (not such an encoding, or a kind into is not).
// TestDecodeStorage compares the two.
func (c *Codecs) decodeStorageProto(data []byte, into runtime.Object) (bool, error) {
	u, ok := into.(protoUnmarshaler)
	if !ok {
		return false, nil
	}
	env, ok := splitEnvelope(data)
	if !ok {
		return false, nil
	}
	group, version, found := bytes.Cut(env.apiVersion, []byte("/"))
	if !found {
		group, version = nil, group
	}
	gvks, _, err := c.scheme.ObjectKinds(into)
	if err != nil {
		return false, nil
	}
	for _, gvk := range gvks {
		if string(group) == gvk.Group && string(version) == gvk.Version && string(env.kind) == gvk.Kind {
			u.Reset()
			if err := u.Unmarshal(env.raw); err != nil {
				return true, err
			}
			c.setKind(into, gvk)
			return true, nil
		}
	}
	return false, nil
}
