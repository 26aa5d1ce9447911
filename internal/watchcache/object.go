package watchcache

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// Object is one cached object version. It is immutable once published:
// nobody may modify it or the API object it decodes to.
//
// An object keeps its stored bytes, not the API object: a decoded object
// is ten or more heap objects the garbage collector marks at every cycle,
// the bytes one it does not look into. The decoded form is kept only while
// the object's event is in the window, for the watchers and controllers
// that read every change; Decoded decodes again after that. What selectors
// need (labels, selectable fields) is kept beside the bytes.
type Object struct {
	// Key is the storage key.
	Key string
	// Namespace and Name identify the object (Namespace empty for
	// cluster-scoped resources).
	Namespace, Name string
	// Rev is the object's resourceVersion (the storage ModRevision, or the
	// delete revision for the object of a DELETED event).
	Rev int64
	// Labels is what label selectors match against (the object's own
	// labels map, shared between objects with identical labels).
	Labels labels.Set
	// Stored is the storage encoding of the object (shared: never
	// modified).
	Stored []byte

	// Memo keeps the object's encodings, so that it is serialised once
	// per format however often it is read.
	Memo codec.Memo

	// fields holds the values of the kind's selectable fields beyond
	// metadata.name and metadata.namespace, in kind.fields order.
	fields []string
	kind   *kind
	// verbatim says Stored is what encoding the object gives, but for its
	// resourceVersion (codec.Verbatim).
	verbatim bool
	// decoded is the API object while the object's event is in the
	// window; nil otherwise.
	decoded atomic.Pointer[decoded]
}

type decoded struct{ obj resources.Object }

// kind is what a cache's objects share.
type kind struct {
	decode Decoder
	// fields are the field labels whose values each object keeps.
	fields []string
	value  func(resources.Object, string) string
	// keepAll keeps every object decoded (Config.KeepDecoded).
	keepAll bool
}

func newKind(cfg Config) *kind {
	k := &kind{decode: cfg.Decode, value: cfg.Fields.Value, keepAll: cfg.KeepDecoded}
	for _, l := range cfg.Fields.Labels {
		if !slices.Contains(resources.MetadataFields, l) {
			k.fields = append(k.fields, l)
		}
	}
	return k
}

// object decodes a stored value into a cached Object whose decoded form
// is kept (keep) or dropped.
func (k *kind) object(kv storage.KeyValue, ns, name string, keep bool) (*Object, error) {
	obj, err := k.decodeValue(kv)
	if err != nil {
		return nil, err
	}
	o := &Object{Key: kv.Key, Namespace: ns, Name: name, Rev: kv.ModRevision, Labels: obj.GetLabels(), Stored: kv.Value, kind: k,
		verbatim: codec.Verbatim(kv.Value, obj)}
	if len(k.fields) > 0 {
		o.fields = make([]string, len(k.fields))
		for i, l := range k.fields {
			o.fields[i] = k.value(obj, l)
		}
	}
	if keep || k.keepAll {
		o.decoded.Store(&decoded{obj})
	}
	return o, nil
}

func (k *kind) decodeValue(kv storage.KeyValue) (resources.Object, error) {
	obj, err := k.decode(kv)
	if err != nil {
		return nil, fmt.Errorf("watchcache: %s at %d: %w", kv.Key, kv.ModRevision, err)
	}
	// Encoders add apiVersion and kind; keeping them would cost two
	// strings per object.
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}

// Decoded returns the API object, with resourceVersion Rev. It is shared
// when the cache still keeps it: read it, never modify it.
func (o *Object) Decoded() resources.Object {
	if d := o.decoded.Load(); d != nil {
		return d.obj
	}
	obj, err := o.kind.decodeValue(storage.KeyValue{Key: o.Key, Value: o.Stored, ModRevision: o.Rev})
	if err != nil {
		// These bytes were decoded when they entered the cache, by the
		// same decoder.
		panic(err)
	}
	return obj
}

// keep keeps o decoded (feeder only: o is not published yet).
func (o *Object) keep() {
	if o.decoded.Load() == nil {
		o.decoded.Store(&decoded{o.Decoded()})
	}
}

// forget drops the decoded form: the object's event left the window.
func (o *Object) forget() {
	if o != nil && !o.kind.keepAll {
		o.decoded.Store(nil)
	}
}

// Cached returns the object as the codec encodes it.
func (o *Object) Cached() codec.Cached { return codec.Cached{From: o, Memo: &o.Memo} }

// Verbatim implements codec.VerbatimSource.
func (o *Object) Verbatim() ([]byte, int64, bool) { return o.Stored, o.Rev, o.verbatim }

func lessObject(a, b *Object) bool { return a.Key < b.Key }

// probe returns a search key for the tree.
func probe(key string) *Object { return &Object{Key: key} }

// matches reports whether the object is selected by s.
func (o *Object) matches(s Selector) bool {
	if s.Namespace != "" && o.Namespace != s.Namespace {
		return false
	}
	if s.Name != "" && o.Name != s.Name {
		return false
	}
	return o.selected(s)
}

// selected reports whether s's label and field parts select the object;
// a walk of s's key range (State.ascend) needs no more, and reading the
// object's names would be a cache miss an object.
func (o *Object) selected(s Selector) bool {
	if s.Label != nil && !s.Label.Empty() && !s.Label.Matches(o.Labels) {
		return false
	}
	if s.Field != nil && !s.Field.Empty() && !s.Field.Matches(objectFields{o}) {
		return false
	}
	return true
}

// objectFields presents an object's field labels to a field selector
// without building a map per object. The selector's labels are the
// kind's (the registry refuses others).
type objectFields struct{ o *Object }

func (f objectFields) Has(label string) bool { return true }

func (f objectFields) Get(label string) string {
	switch label {
	case "metadata.name":
		return f.o.Name
	case "metadata.namespace":
		return f.o.Namespace
	}
	if i := slices.Index(f.o.kind.fields, label); i >= 0 {
		return f.o.fields[i]
	}
	return ""
}

// Selector chooses objects: by namespace and name (from the URL or
// metadata.* field selectors, used to narrow the key range) and by label and
// field selectors.
type Selector struct {
	Namespace string
	Name      string
	Label     labels.Selector
	Field     fields.Selector
}

// Everything reports whether the selector selects all objects.
func (s Selector) Everything() bool {
	return s.Namespace == "" && s.Name == "" &&
		(s.Label == nil || s.Label.Empty()) && (s.Field == nil || s.Field.Empty())
}

// keyScope returns where selected objects can be, given the resource's
// key prefix ("/registry/leases/"): keys that start with scope, or, when
// exact, the key scope itself. A prefix test is cheaper than comparing
// each key with the range's end (the keys share long prefixes).
func (s Selector) keyScope(prefix string, namespaced bool) (scope string, exact bool) {
	switch {
	case !namespaced && s.Name != "":
		return prefix + s.Name, true
	case s.Namespace != "" && s.Name != "":
		return prefix + s.Namespace + "/" + s.Name, true
	case s.Namespace != "":
		return prefix + s.Namespace + "/", false
	default:
		return prefix, false
	}
}

// splitKey returns namespace and name of a key under prefix.
func splitKey(prefix, key string, namespaced bool) (namespace, name string) {
	rest := strings.TrimPrefix(key, prefix)
	if !namespaced {
		return "", rest
	}
	ns, name, _ := strings.Cut(rest, "/")
	return ns, name
}

// setLabels makes o use labels, an equal map (feeder only: o is not
// published yet).
func (o *Object) setLabels(labels map[string]string) {
	o.Labels = labels
	if d := o.decoded.Load(); d != nil {
		d.obj.SetLabels(labels)
	}
}
