package codec

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/leasehold/leasehold/internal/resources"
)

// Media types served.
const (
	JSON     = runtime.ContentTypeJSON
	YAML     = runtime.ContentTypeYAML
	Protobuf = runtime.ContentTypeProtobuf
)

// Codecs holds the scheme and the serializers built from it. It is
// immutable after New and safe for concurrent use.
type Codecs struct {
	scheme *runtime.Scheme
	// infos are the wire formats in kube-apiserver's order of preference:
	// JSON, YAML, protobuf.
	infos []runtime.SerializerInfo
	// protoStorage and jsonStorage encode stored objects: protobuf for
	// types that have a protobuf encoding (every k8s.io/api type), JSON
	// for the others, as kube-apiserver stores built-in kinds and custom
	// resources.
	protoStorage, jsonStorage runtime.Serializer
	// apiVersions are the scheme's group versions as apiVersion strings,
	// made once (setKind).
	apiVersions map[schema.GroupVersion]string
	// negotiated remembers the outcome of Accept headers seen before
	// (clients send a handful), bounded by negotiatedMax.
	negotiated     sync.Map // negotiation → Output
	negotiatedSize atomic.Int32
}

// New builds the scheme of the served kinds, at every version they are
// served at, and of the meta types leasehold answers with.
func New(kinds []*resources.Kind) (*Codecs, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{metav1.AddMetaToScheme, metav1beta1.AddMetaToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("codec: building scheme: %w", err)
		}
	}
	// Option types (DeleteOptions in a request body) may come as
	// meta.k8s.io/v1, as kubectl and dynamic clients send them, or in the
	// resource's group version, as typed clients send them.
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	seen := map[schema.GroupVersion]bool{}
	for _, k := range kinds {
		for _, v := range k.Versions {
			scheme.AddKnownTypeWithName(v.WithKind(k.Names.Kind), v.New())
			scheme.AddKnownTypeWithName(v.WithKind(k.Names.ListKind), v.NewList())
			if !seen[v.GroupVersion] {
				seen[v.GroupVersion] = true
				metav1.AddToGroupVersion(scheme, v.GroupVersion)
			}
		}
	}

	factory := serializer.NewCodecFactory(scheme, serializer.EnablePretty)
	var infos []runtime.SerializerInfo
	for _, info := range factory.SupportedMediaTypes() {
		switch info.MediaType {
		case JSON, YAML, Protobuf:
			infos = append(infos, info)
		}
	}
	apiVersions := map[schema.GroupVersion]string{}
	for gvk := range scheme.AllKnownTypes() {
		apiVersions[gvk.GroupVersion()] = gvk.GroupVersion().String()
	}
	return &Codecs{
		apiVersions:  apiVersions,
		scheme:       scheme,
		infos:        infos,
		protoStorage: protobuf.NewSerializer(scheme, scheme),
		jsonStorage:  kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{}),
	}, nil
}

// Scheme returns the scheme. Callers must not register types in it.
func (c *Codecs) Scheme() *runtime.Scheme { return c.scheme }

// MediaTypes lists the media types accepted for request bodies and
// responses.
func (c *Codecs) MediaTypes() []string {
	out := make([]string, 0, len(c.infos))
	for _, info := range c.infos {
		out = append(out, info.MediaType)
	}
	return out
}

// StreamMediaTypes lists the media types of watch streams.
func (c *Codecs) StreamMediaTypes() []string {
	var out []string
	for _, info := range c.infos {
		if info.StreamSerializer != nil {
			out = append(out, info.MediaType+";stream=watch")
		}
	}
	return out
}

// Encode writes obj in the negotiated format, setting its apiVersion and
// kind from the scheme. obj itself is not modified: it may be shared.
func (c *Codecs) Encode(w io.Writer, out Output, obj runtime.Object) error {
	typed, err := c.WithTypeMeta(obj)
	if err != nil {
		return err
	}
	return out.serializer().Encode(typed, w)
}

// WithTypeMeta returns obj with apiVersion and kind set. When obj lacks
// them it returns a shallow copy, so that a shared object (from the watch
// cache) is never written to.
func (c *Codecs) WithTypeMeta(obj runtime.Object) (runtime.Object, error) {
	gvk, err := c.kindOf(obj)
	if err != nil {
		return nil, err
	}
	if obj.GetObjectKind().GroupVersionKind() == gvk {
		return obj, nil
	}
	out, err := shallowCopy(obj)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

// setKind sets obj's apiVersion and kind, with the apiVersion string
// made once for the scheme's group versions (TypeMeta's
// SetGroupVersionKind builds a new one each time: an allocation of every
// decode).
func (c *Codecs) setKind(obj runtime.Object, gvk schema.GroupVersionKind) {
	tm, ok := obj.GetObjectKind().(*metav1.TypeMeta)
	apiVersion, known := c.apiVersions[gvk.GroupVersion()]
	if !ok || !known {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return
	}
	tm.APIVersion, tm.Kind = apiVersion, gvk.Kind
}

// kindOf returns obj's apiVersion and kind: the ones it has when the
// scheme knows its type by them, or else the scheme's first for its type.
func (c *Codecs) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	have := obj.GetObjectKind().GroupVersionKind()
	for _, gvk := range gvks {
		if have == gvk {
			return gvk, nil
		}
	}
	return gvks[0], nil
}

// shallowCopy copies the struct obj points to; the copy shares every
// pointer, map and slice with obj, so only its own top-level fields (such as
// TypeMeta) may be changed.
func shallowCopy(obj runtime.Object) (runtime.Object, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("codec: %T is not a pointer", obj)
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	return cp.Interface().(runtime.Object), nil
}

// Decoded is a request body after decoding.
type Decoded struct {
	Object runtime.Object
	// GVK is the apiVersion and kind the body declared, filled in from the
	// expected kind where the body left them out.
	GVK schema.GroupVersionKind
	// Strict lists the unknown and duplicate fields found by a strict
	// decode; strictErr is the error that carried them.
	Strict    []error
	strictErr error
	// want is the kind decoding was for.
	want string
}

// StrictError words a strict decoding failure as kube-apiserver does for
// fieldValidation=Strict (a 400).
func (d Decoded) StrictError(body []byte) error {
	return DecodeError(d.strictErr, d.want, &d.GVK, body)
}

// Decode decodes a request body in the given format into into (a new,
// empty object of the expected kind). With strict set, unknown and
// duplicate fields are collected in Strict instead of failing the decode.
// A malformed body answers 400 with kube-apiserver's wording. The result
// may be of another kind than into when the body says so; callers check.
func (c *Codecs) Decode(info runtime.SerializerInfo, strict bool, body []byte, into runtime.Object) (Decoded, error) {
	gvks, _, err := c.scheme.ObjectKinds(into)
	if err != nil {
		return Decoded{}, apierrors.NewInternalError(err)
	}
	want := gvks[0]
	if info.MediaType == Protobuf {
		// What the protobuf serializer does with a body of into's kind,
		// without first copying the object's bytes out of the envelope;
		// anything else, failures included, is the serializer's.
		if done, err := c.decodeStorageProto(body, into); done && err == nil {
			return Decoded{Object: into, GVK: into.GetObjectKind().GroupVersionKind(), want: want.Kind}, nil
		}
	}
	s := info.Serializer
	if strict && info.StrictSerializer != nil {
		s = info.StrictSerializer
	}
	obj, gvk, err := s.Decode(body, &want, into)
	d := Decoded{want: want.Kind}
	if gvk != nil {
		d.GVK = *gvk
	}
	if err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			return Decoded{}, DecodeError(err, want.Kind, gvk, body)
		}
		d.Strict, d.strictErr = se.Errors(), err
	}
	d.Object = obj
	return d, nil
}

// DecodeError words a decode failure as kube-apiserver does
// (apiserver/pkg/endpoints/handlers/rest.go transformDecodeError).
func DecodeError(err error, kind string, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && gvk.Kind != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, kind, err))
	}
	summary := body
	if len(summary) > 30 {
		summary = append(bytes.Clone(summary[:30]), "..."...)
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", kind, err, summary))
}

// UnsupportedMediaType is the 415 answer for a body in none of the
// accepted media types.
func UnsupportedMediaType(accepted []string) error {
	return statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", join(accepted)))
}

func statusError(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: msg,
	}}
}

func join(s []string) string {
	var b bytes.Buffer
	for i, v := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v)
	}
	return b.String()
}

// DecodeObject decodes an object of res that a client sent (a request
// body, or what a patch made of the stored object), as kube-apiserver's
// decoder does: strict or lenient (see Decode), then the version's
// defaults applied. Defaults are applied here and nowhere else. A body of
// another group version or kind fails with a *WrongKindError.
func (c *Codecs) DecodeObject(info runtime.SerializerInfo, strict bool, body []byte, res resources.Resource) (resources.Object, Decoded, error) {
	d, err := c.Decode(info, strict, body, res.New())
	if err != nil {
		return nil, d, err
	}
	obj, ok := d.Object.(resources.Object)
	if !ok || d.GVK.GroupVersion() != res.GroupVersion() || d.GVK.Kind != res.Kind.Names.Kind {
		return nil, d, &WrongKindError{Got: d.GVK, Want: res.GroupVersionKind(), Object: d.Object}
	}
	res.Default(obj)
	return obj, d, nil
}

// WrongKindError says a decoded object is not of the expected kind.
type WrongKindError struct {
	Got, Want schema.GroupVersionKind
	Object    runtime.Object
}

func (e *WrongKindError) Error() string {
	return fmt.Sprintf("decoded %v, want %v", e.Got, e.Want)
}

// ObjectFromMap converts what a strategic merge patch made of an object
// into an object of res, as kube-apiserver's patch handler does
// (DefaultUnstructuredConverter, with strict field checks when strict),
// and applies the version's defaults, as DecodeObject does. Unknown and
// duplicate fields come back in strictErrs.
func (c *Codecs) ObjectFromMap(m map[string]any, strict bool, res resources.Resource) (obj resources.Object, strictErrs []error, err error) {
	obj = res.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, obj, strict); err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, nil, err
		}
		strictErrs = se.Errors()
	}
	res.Default(obj)
	return obj, strictErrs, nil
}
