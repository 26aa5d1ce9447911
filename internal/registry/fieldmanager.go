package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/leasehold/leasehold/internal/resources"
)

// fieldManagerKey names a served version (by index) of a kind, or a
// subresource of it.
type fieldManagerKey struct {
	version     int
	subresource string
}

// newFieldManagers builds kube-apiserver's field manager (managedFields
// and server-side apply, from k8s.io/apimachinery/pkg/util/managedfields)
// for each served version of k and each of its subresources. Each works
// in its own version (its hub is the version itself): it takes and
// returns objects of the request's version, and the scheme converts
// managedFields recorded at other versions.
func newFieldManagers(tc managedfields.TypeConverter, scheme *runtime.Scheme, k *resources.Kind) (map[fieldManagerKey]*managedfields.FieldManager, error) {
	out := map[fieldManagerKey]*managedfields.FieldManager{}
	subs := map[string][]string{"": k.ResetFields}
	for _, sub := range k.Subresources {
		subs[sub.Name] = sub.ResetFields
	}
	for i, res := range k.Resources() {
		for sub, reset := range subs {
			var resetFields map[fieldpath.APIVersion]fieldpath.Filter
			if len(reset) > 0 {
				set := fieldpath.NewSet()
				for _, f := range reset {
					set.Insert(fieldpath.MakePathOrDie(f))
				}
				resetFields = map[fieldpath.APIVersion]fieldpath.Filter{
					fieldpath.APIVersion(res.APIVersion()): fieldpath.NewExcludeSetFilter(set),
				}
			}
			fm, err := managedfields.NewDefaultFieldManager(tc, scheme, defaulter{res}, scheme,
				res.GroupVersionKind(), res.GroupVersion(), sub, resetFields)
			if err != nil {
				return nil, fmt.Errorf("field manager for %s %q: %w", res.GroupVersionResource(), sub, err)
			}
			out[fieldManagerKey{i, sub}] = fm
		}
	}
	return out, nil
}

// defaulter applies a version's defaults to the objects server-side apply
// builds, as the scheme's defaulting functions do in kube-apiserver.
type defaulter struct{ res resources.Resource }

func (d defaulter) Default(obj runtime.Object) {
	if o, ok := obj.(resources.Object); ok {
		d.res.Default(o)
	}
}

// fieldManager returns the field manager of res (or of a subresource),
// nil when managed fields are not tracked (no type converter configured).
func (r *Registry) fieldManager(res resources.Resource, subresource string) *managedfields.FieldManager {
	return r.state[res.Kind].fieldManagers[fieldManagerKey{res.VersionIndex(), subresource}]
}

// trackUpdate records a write by manager in obj's managedFields, given
// the stored state existing (nil on create) and live, the stored object
// at res's version (an empty object on create). It reports whether the
// result leaves obj's one managedFields entry owning every field (see
// fastpath.go), which the caller records once the write is stored.
func (r *Registry) trackUpdate(res resources.Resource, subresource, key string, existing *current, live, obj resources.Object, manager string) (resources.Object, bool) {
	fm := r.fieldManager(res, subresource)
	if fm == nil {
		return obj, false
	}
	fast := subresource == "" && fastPathKind(res.Kind)
	if fast && existing != nil && existing.rev != 0 && r.state[res.Kind].owners.at(key) == existing.rev {
		if out, ok := r.compare.fastUpdate(live, obj, manager, res.APIVersion(), r.now()); ok {
			return out, true
		}
	}
	sentNone := obj.GetManagedFields() == nil
	out, ok := fm.UpdateNoErrors(live, obj, manager).(resources.Object)
	if !ok {
		return obj, false
	}
	if !fast {
		return out, false
	}
	if _, sole := soleEntry(out, manager, res.APIVersion()); !sole {
		return out, false
	}
	// A create by the manager added every field; anything else is checked.
	if existing == nil && sentNone {
		return out, true
	}
	return out, ownsAll(r.typeConverter, res.GroupVersionKind(), out)
}
