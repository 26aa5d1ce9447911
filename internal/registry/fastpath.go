package registry

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// exists: the manager's set stays as it is, and its time moves to now
// when a value changed, which is what the field manager would compute.
// One walk over both objects (comparer.tracked) tells the fields apart and
// the values, and declines where its view could differ from the field
// manager's. TestManagedFieldsFastPath runs both paths on many generated
// objects, and FuzzManagedFieldsFastPath on more.
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
// an expiry) are pruned once they outnumber the cached objects: on a
// write, and every minute (Registry.Run), as a burst of expiries may be
// followed by no write at all.
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
	s.pruneLocked()
}

func (s *soleOwners) prune() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
}

func (s *soleOwners) pruneLocked() {
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
func (c *comparer) fastUpdate(live, obj resources.Object, manager, apiVersion string, now time.Time) (resources.Object, bool) {
	entry, ok := soleEntry(live, manager, apiVersion)
	if !ok {
		return nil, false
	}
	if sent := obj.GetManagedFields(); sent != nil && !sameEntries(sent, live.GetManagedFields(), true) {
		return nil, false
	}
	// The field manager moves the time only when a tracked field changed.
	switch c.tracked(live, obj) {
	case unsure:
		return nil, false
	case changed:
		entry.Time = &metav1.Time{Time: now.UTC()}
	}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
	return obj, true
}

// sameEntries says whether two managedFields lists are equal, as
// equality.Semantic would say (times compared as instants), and, when
// times is false, whatever their times. A renewal sends its managedFields
// back, and the reflective comparison cost a twentieth of it.
func sameEntries(a, b []metav1.ManagedFieldsEntry, times bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Manager != y.Manager || x.Operation != y.Operation || x.APIVersion != y.APIVersion ||
			x.FieldsType != y.FieldsType || x.Subresource != y.Subresource {
			return false
		}
		if (x.FieldsV1 == nil) != (y.FieldsV1 == nil) || x.FieldsV1 != nil && !bytes.Equal(x.FieldsV1.Raw, y.FieldsV1.Raw) {
			return false
		}
		if times && !x.Time.Equal(y.Time) {
			return false
		}
	}
	return true
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

// verdict is what comparer.tracked can tell of two objects.
type verdict int

const (
	same    verdict = iota // the same fields, every value equal
	changed                // the same fields, a value differs
	unsure                 // the fields may differ, or the field manager may see it otherwise
)

// tracked compares a and b, two objects of one Go type, as the
// field manager's comparison does, metadata's untracked fields aside:
// changed when it would find a modified field (which moves the manager's
// time) and none added or removed. Where its view may differ from a plain
// comparison it answers unsure, unless the values are identical: a value
// that may be omitted when empty, nil against empty, a list (its items
// may be keyed, or a set) unless declared atomic, a structured value with
// its own JSON form.
// Values with a scalar JSON form (a time, a quantity) are compared by
// that form, as the field manager converts them: a MicroTime to the
// microsecond.
func (c *comparer) tracked(a, b resources.Object) verdict {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Pointer {
		return unsure
	}
	return c.value(va.Elem(), vb.Elem())
}

// comparer compares objects as the field manager does, knowing which of
// their lists are atomic.
type comparer struct {
	// atomic reports whether a struct type's field (by JSON name) is an
	// atomic list; nil: none is known to be.
	atomic func(t reflect.Type, field string) bool
	shapes sync.Map // reflect.Type → *shape
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	objectMeta    = reflect.TypeFor[metav1.ObjectMeta]()
	typeMeta      = reflect.TypeFor[metav1.TypeMeta]()
)

// trackedMeta are the fields of ObjectMeta the field manager tracks.
var trackedMeta = map[string]bool{
	"GenerateName": true, "DeletionTimestamp": true, "DeletionGracePeriodSeconds": true,
	"Labels": true, "Annotations": true, "OwnerReferences": true, "Finalizers": true,
}

// shape is what comparer.value needs to know of a type, computed once.
type shape struct {
	// leaf: one value on the wire with its own JSON form (a time, a
	// quantity, an int-or-string).
	leaf bool
	// fields are a struct's fields on the wire (those the field manager
	// tracks, for ObjectMeta).
	fields []wireField
	// elem is the shape of a pointer's or map's element, found on first
	// use (shapes refer to each other directly: a lookup in
	// comparer.shapes for every value compared was 1% of a renewal).
	elem atomic.Pointer[shape]
}

type wireField struct {
	index int
	// atomic: a list the field manager takes as one value.
	atomic bool
	// shape is the field's, found on first use.
	shape atomic.Pointer[shape]
}

func (c *comparer) shapeOf(t reflect.Type) *shape {
	if s, ok := c.shapes.Load(t); ok {
		return s.(*shape)
	}
	// A pointer is followed (nil or not) to its element, the leaf.
	s := &shape{leaf: t.Kind() != reflect.Pointer && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler))}
	if t.Kind() == reflect.Struct && !s.leaf {
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case t == typeMeta, !f.IsExported(), f.Tag.Get("json") == "-":
			case t == objectMeta && !trackedMeta[f.Name]:
			default:
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				atomic := f.Type.Kind() == reflect.Slice && c.atomic != nil && c.atomic(t, name)
				s.fields = append(s.fields, wireField{index: i, atomic: atomic})
			}
		}
	}
	c.shapes.Store(t, s)
	return s
}

// linked returns *p, which it first sets to t's shape if it is unset.
func (c *comparer) linked(p *atomic.Pointer[shape], t reflect.Type) *shape {
	if sh := p.Load(); sh != nil {
		return sh
	}
	sh := c.shapeOf(t)
	p.Store(sh)
	return sh
}

func (c *comparer) value(a, b reflect.Value) verdict {
	return c.valueOf(c.shapeOf(a.Type()), a, b)
}

// valueOf is value for a and b of shape sh.
func (c *comparer) valueOf(sh *shape, a, b reflect.Value) verdict {
	if sh.leaf {
		return compareLeaf(a, b)
	}
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
			return same
		case a.IsNil() || b.IsNil():
			return unsure
		}
		return c.valueOf(c.linked(&sh.elem, a.Type().Elem()), a.Elem(), b.Elem())
	case reflect.Struct:
		v := same
		for i := range sh.fields {
			f := &sh.fields[i]
			fa, fb := a.Field(f.index), b.Field(f.index)
			if f.atomic {
				v = max(v, compareAtomic(fa, fb))
			} else {
				v = max(v, c.valueOf(c.linked(&f.shape, fa.Type()), fa, fb))
			}
			if v == unsure {
				return unsure
			}
		}
		return v
	case reflect.Map:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			return unsure
		}
		if ma, ok := a.Interface().(map[string]string); ok {
			// Labels and annotations, without reflection's per entry
			// allocations: what the loop below finds for them.
			return stringMap(ma, b.Interface().(map[string]string))
		}
		v := same
		elem := c.linked(&sh.elem, a.Type().Elem())
		iter := a.MapRange()
		for iter.Next() {
			bv := b.MapIndex(iter.Key())
			if !bv.IsValid() {
				return unsure
			}
			if v = max(v, c.valueOf(elem, iter.Value(), bv)); v == unsure {
				return unsure
			}
		}
		return v
	case reflect.Slice, reflect.Array, reflect.Interface:
		if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 && a.IsNil() == b.IsNil() {
			return same // as deepEqual finds, without its allocations
		}
		if deepEqual(a, b) {
			return same
		}
		return unsure
	default:
		switch {
		case a.Equal(b):
			return same
		case a.IsZero() || b.IsZero():
			return unsure // omitted when empty, perhaps
		}
		return changed
	}
}

// stringMap is comparer.valueOf for two maps of strings of one length:
// a missing key, or a value that is empty on one side only, may be a
// field added or removed.
func stringMap(a, b map[string]string) verdict {
	v := same
	for k, x := range a {
		y, ok := b[k]
		switch {
		case !ok || (x == "") != (y == ""):
			return unsure
		case x != y:
			v = changed
		}
	}
	return v
}

// compareAtomic compares two atomic lists as the field manager does:
// structured-merge-diff compares two lists of Go values with
// reflect.DeepEqual. changed when both are there and differ; an empty
// list may be omitted, and then the field is gone: unsure.
func compareAtomic(a, b reflect.Value) verdict {
	switch {
	case deepEqual(a, b):
		return same
	case a.Len() == 0 || b.Len() == 0:
		return unsure
	}
	return changed
}

// compareLeaf compares two values with a JSON form of their own by that
// form, as the field manager sees them: a non-null scalar that differs
// changed.
func compareLeaf(a, b reflect.Value) verdict {
	if a.Type() == microTime {
		// As its JSON form, which would cost ten times as much.
		ta, tb := microTimeOf(a), microTimeOf(b)
		switch {
		case ta.IsZero() != tb.IsZero():
			return unsure // null
		case ta.Truncate(time.Microsecond).Equal(tb.Truncate(time.Microsecond)):
			return same
		}
		return changed
	}
	if deepEqual(a, b) {
		return same
	}
	ja, errA := json.Marshal(a.Interface())
	jb, errB := json.Marshal(b.Interface())
	switch {
	case errA != nil || errB != nil:
		return unsure
	case bytes.Equal(ja, jb):
		return same
	case scalarJSON(ja) && scalarJSON(jb):
		return changed
	}
	return unsure
}

var microTime = reflect.TypeFor[metav1.MicroTime]()

// microTimeOf is v's MicroTime, read through a pointer when it can be:
// boxing the struct in an interface would allocate.
func microTimeOf(v reflect.Value) metav1.MicroTime {
	if v.CanAddr() {
		return *v.Addr().Interface().(*metav1.MicroTime)
	}
	return v.Interface().(metav1.MicroTime)
}

// deepEqual is reflect.DeepEqual of a's and b's values, compared through
// pointers to them when it can be (pointers to deeply equal values are
// deeply equal), for the same reason.
func deepEqual(a, b reflect.Value) bool {
	if a.CanAddr() && b.CanAddr() {
		return reflect.DeepEqual(a.Addr().Interface(), b.Addr().Interface())
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// scalarJSON reports whether data is a JSON scalar other than null.
func scalarJSON(data []byte) bool {
	return len(data) > 0 && data[0] != '{' && data[0] != '[' && string(data) != "null"
}
