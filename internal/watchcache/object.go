package watchcache

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// Object is one cached object version. It is immutable once published:
// nobody may modify it or the API object it holds.
type Object struct {
	// Key is the storage key.
	Key string
	// Namespace and Name identify the object (Namespace empty for
	// cluster-scoped resources).
	Namespace, Name string
	// Rev is the object's resourceVersion (the storage ModRevision, or the
	// delete revision for the object of a DELETED event).
	Rev int64
	// Obj is the decoded API object, with resourceVersion set to Rev.
	Obj resources.Object
	// Labels is what label selectors match against (the object's own
	// labels map, shared between objects with identical labels).
	Labels labels.Set

	// Memo keeps the object's encodings, so that it is serialised once
	// per format however often it is read.
	Memo codec.Memo
	// Stored is a digest of the stored bytes Obj was decoded from, which
	// a writer compares its new encoding with (the bytes are not kept).
	Stored codec.Digest
}

// Cached returns the object as the codec encodes it.
func (o *Object) Cached() codec.Cached { return codec.Cached{Obj: o.Obj, Memo: &o.Memo} }

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
	if s.Label != nil && !s.Label.Empty() && !s.Label.Matches(o.Labels) {
		return false
	}
	if s.Field != nil && !s.Field.Empty() && !s.Field.Matches(objectFields{o.Obj, s.FieldValue}) {
		return false
	}
	return true
}

// objectFields presents an object's field labels to a field selector
// without building a map per object.
type objectFields struct {
	obj   resources.Object
	value func(resources.Object, string) string
}

func (f objectFields) Has(label string) bool { return f.value != nil }

func (f objectFields) Get(label string) string {
	if f.value == nil {
		return ""
	}
	return f.value(f.obj, label)
}

// Selector chooses objects: by namespace and name (from the URL or
// metadata.* field selectors, used to narrow the key range) and by label and
// field selectors.
type Selector struct {
	Namespace string
	Name      string
	Label     labels.Selector
	Field     fields.Selector
	// FieldValue returns an object's value of a field label; required when
	// Field selects anything (the resource's Field).
	FieldValue func(obj resources.Object, label string) string
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
