package registry

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/leasehold/leasehold/internal/resources"
)

// The managedFields fast path.
//
// Tracking managedFields costs a quarter of a lease renewal: the field
// manager converts both objects to typed values, validates and compares
// them. For the update that dominates a coordination server, its result is
// known in advance. When
//
//   - the stored object's managedFields are one Update entry, of the
//     writing manager, at the request's version, for the main resource,
//   - that manager owns every field the stored object has (sole owner;
//     known, not computed, see below),
//   - the request carries the same managedFields or none,
//   - and the new object has the same fields as the stored one (values
//     may differ: a renewal changes renewTime, a takeover holderIdentity),
//
// then every changed field is the manager's already and no other manager
// exists: the manager's set stays as it is and only its time moves to
// now, which is what the field manager would compute. (When nothing but
// the time changed, the write is a no-op either way: see
// ignoreManagedFieldsTimes.) TestManagedFieldsFastPath runs both paths on
// many generated objects, and FuzzManagedFieldsFastPath on more.
//
// "Sole owner" holds by construction after a create by the manager (it
// added every field) and is kept by the fast path (the fields did not
// change); after any other write it is checked once, with the type
// converter, when the result has the fast path's shape. The registry
// remembers it per object as the resourceVersion it held at (owners), so a
// write by anyone else, which moves the resourceVersion, voids it.

// soleOwners remembers, per storage key, the resourceVersion at which the
// object's one managedFields entry owned all of its fields. Entries of
// objects gone without a delete through this registry (another replica's,
// an expiry) are pruned once they outnumber the cached objects.
type soleOwners struct {
	mu   sync.Mutex // guards revs
	revs map[string]int64
	// live reports whether key is still stored at rev (the cache).
	live func(key string, rev int64) bool
	// size is the number of cached objects.
	size func() int
}

func (s *soleOwners) at(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[key]
}

func (s *soleOwners) set(key string, rev int64, sole bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sole:
		if s.revs == nil {
			s.revs = map[string]int64{}
		}
		s.revs[key] = rev
	default:
		delete(s.revs, key)
	}
	if n := len(s.revs); n > 1024 && n > 2*s.size() {
		for k, r := range s.revs {
			if !s.live(k, r) {
				delete(s.revs, k)
			}
		}
	}
}

// fastPathKind reports whether a kind's updates may take the fast path:
// no field of it is reset by the field manager (a namespace's status).
func fastPathKind(k *resources.Kind) bool { return len(k.ResetFields) == 0 }

// soleEntry returns the one managedFields entry of obj when it is an
// Update by manager at version apiVersion on the main resource.
func soleEntry(obj resources.Object, manager, apiVersion string) (metav1.ManagedFieldsEntry, bool) {
	mf := obj.GetManagedFields()
	if len(mf) != 1 {
		return metav1.ManagedFieldsEntry{}, false
	}
	e := mf[0]
	ok := e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationUpdate &&
		e.APIVersion == apiVersion && e.Subresource == "" && e.FieldsType == "FieldsV1" && e.FieldsV1 != nil
	return e, ok
}

// fastUpdate returns obj with the managedFields the field manager would
// give an update of live by manager, when the fast path applies: live's
// one entry with its time now. live's sole ownership must be known.
func fastUpdate(live, obj resources.Object, manager, apiVersion string, now time.Time) (resources.Object, bool) {
	entry, ok := soleEntry(live, manager, apiVersion)
	if !ok {
		return nil, false
	}
	if sent := obj.GetManagedFields(); sent != nil && !equality.Semantic.DeepEqual(sent, live.GetManagedFields()) {
		return nil, false
	}
	if !sameFields(live, obj) {
		return nil, false
	}
	// The field manager moves the time only when a tracked field changed.
	if !trackedEqual(live, obj) {
		entry.Time = &metav1.Time{Time: now.UTC()}
	}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
	return obj, true
}

// trackedEqual reports whether a and b are equal in every field the field
// manager tracks (metadata's stripped fields aside).
func trackedEqual(a, b resources.Object) bool {
	return equality.Semantic.DeepEqual(untracked(a), untracked(b))
}

// untracked returns a shallow copy of obj without the fields the field
// manager does not track. The copy shares everything else with obj: it is
// only read.
func untracked(obj resources.Object) any {
	v := reflect.ValueOf(obj).Elem()
	cp := reflect.New(v.Type())
	cp.Elem().Set(v)
	c := cp.Interface().(resources.Object)
	c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	c.SetName("")
	c.SetNamespace("")
	c.SetCreationTimestamp(metav1.Time{})
	c.SetSelfLink("")
	c.SetUID("")
	c.SetGeneration(0)
	c.SetManagedFields(nil)
	c.SetResourceVersion("")
	return c
}

// strippedMeta are the metadata fields the field manager never tracks
// (its stripMeta manager).
var strippedMeta = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

// ownsAll checks, with the type converter, that obj's one entry (which
// must be soleEntry's) owns every field obj, an object of kind gvk, has.
func ownsAll(tc managedfields.TypeConverter, gvk schema.GroupVersionKind, obj resources.Object) bool {
	mf := obj.GetManagedFields()
	if len(mf) != 1 || mf[0].FieldsV1 == nil {
		return false
	}
	owned := &fieldpath.Set{}
	if err := owned.FromJSON(strings.NewReader(string(mf[0].FieldsV1.Raw))); err != nil {
		return false
	}
	bare, ok := obj.DeepCopyObject().(resources.Object)
	if !ok {
		return false
	}
	bare.SetManagedFields(nil)
	bare.GetObjectKind().SetGroupVersionKind(gvk)
	tv, err := tc.ObjectToTyped(bare)
	if err != nil {
		return false
	}
	fields, err := tv.ToFieldSet()
	if err != nil {
		return false
	}
	return fields.Difference(strippedMeta).Difference(owned).Empty()
}

// sameFields reports whether a and b, two objects of one Go type, have
// the same fields present, as the field manager tracks them: metadata's
// untracked fields aside, every field present in one is present in the
// other, whatever its value. It errs towards false: a list must be equal
// (its items may be keyed), and any difference it cannot judge counts.
func sameFields(a, b resources.Object) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Pointer {
		return false
	}
	return sameValue(va.Elem(), vb.Elem())
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	objectMeta    = reflect.TypeFor[metav1.ObjectMeta]()
	typeMeta      = reflect.TypeFor[metav1.TypeMeta]()
)

// leaf reports whether a type is one value on the wire (a time, a
// quantity, an int-or-string): it has its own JSON form.
func leaf(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)
}

func sameValue(a, b reflect.Value) bool {
	t := a.Type()
	switch {
	case t == typeMeta:
		return true // apiVersion and kind: not tracked
	case t == objectMeta:
		return sameMeta(a.Addr().Interface().(*metav1.ObjectMeta), b.Addr().Interface().(*metav1.ObjectMeta))
	case leaf(t):
		return a.IsZero() == b.IsZero()
	}
	switch t.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			return false
		}
		iter := a.MapRange()
		for iter.Next() {
			bv := b.MapIndex(iter.Key())
			if !bv.IsValid() || !sameValue(iter.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array, reflect.Interface:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	default:
		// A scalar: present or absent alike (an omitted zero value).
		return a.IsZero() == b.IsZero()
	}
}

// sameMeta compares the tracked fields of two ObjectMetas.
func sameMeta(a, b *metav1.ObjectMeta) bool {
	return (a.GenerateName == "") == (b.GenerateName == "") &&
		(a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil) &&
		(a.DeletionGracePeriodSeconds == nil) == (b.DeletionGracePeriodSeconds == nil) &&
		sameKeys(a.Labels, b.Labels) && sameKeys(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		equality.Semantic.DeepEqual(a.Finalizers, b.Finalizers)
}

func sameKeys(a, b map[string]string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
