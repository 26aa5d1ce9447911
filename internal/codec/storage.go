package codec

import (
	"bytes"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// EncodeStorage returns the bytes stored for obj, an object of its kind's
// storage version: kube-apiserver's storage encoding, the protobuf
// envelope ("k8s\x00" + runtime.Unknown) for types with a protobuf
// encoding and JSON for the others, with apiVersion and kind set and
// metadata.resourceVersion left out, since the store's revision is the
// resourceVersion.
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
	s := c.jsonStorage
	if bytes.HasPrefix(data, protobufPrefix) {
		s = c.protoStorage
	}
	obj, _, err := s.Decode(data, nil, into)
	if err != nil {
		return fmt.Errorf("codec: decoding stored object: %w", err)
	}
	if obj != into {
		return fmt.Errorf("codec: stored object is a %T, want %T", obj, into)
	}
	m, err := meta.Accessor(obj)
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
	m = obj.(sizedMarshaler)
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
	msg, ok := bytes.CutPrefix(data, protobufPrefix)
	if !ok {
		return nil, false
	}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, false
		}
		msg = msg[n:]
		if num != 2 || typ != protowire.BytesType { // not Unknown.raw
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return nil, false
			}
			msg = msg[n:]
			continue
		}
		// The object: its first field must be its metadata (1).
		_, n = protowire.ConsumeVarint(msg) // raw's length
		if n < 0 {
			return nil, false
		}
		obj := msg[n:]
		num, typ, n = protowire.ConsumeTag(obj)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, false
		}
		obj = obj[n:]
		if n = protowire.ConsumeFieldValue(num, typ, obj); n < 0 {
			return nil, false
		}
		return obj[n:], true
	}
	return nil, false
}
