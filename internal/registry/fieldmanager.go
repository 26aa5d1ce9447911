package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/leasehold/leasehold/internal/resources"
)

// fieldManagerKey names a resource or one of its subresources.
type fieldManagerKey struct {
	res         *resources.Resource
	subresource string
}

// newFieldManagers builds kube-apiserver's field manager (managedFields and
// server-side apply, from k8s.io/apimachinery/pkg/util/managedfields) for
// each resource and subresource. leasehold serves one version per
// resource, so the hub version is the served version.
func newFieldManagers(tc managedfields.TypeConverter, scheme *runtime.Scheme, rs []*resources.Resource) (map[fieldManagerKey]*managedfields.FieldManager, error) {
	out := map[fieldManagerKey]*managedfields.FieldManager{}
	for _, res := range rs {
		subs := map[string][]string{"": res.ResetFields}
		for name, sub := range res.Subresources {
			subs[name] = sub.ResetFields
		}
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
				return nil, fmt.Errorf("field manager for %s %q: %w", res.Plural, sub, err)
			}
			out[fieldManagerKey{res, sub}] = fm
		}
	}
	return out, nil
}

// defaulter applies a resource's defaults, as the scheme's defaulting
// functions do in kube-apiserver (leasehold's scheme has none).
type defaulter struct{ res *resources.Resource }

func (d defaulter) Default(obj runtime.Object) {
	if o, ok := obj.(resources.Object); ok && d.res.Default != nil {
		d.res.Default(o)
	}
}

// fieldManager returns the field manager of res (or of a subresource), nil
// when managed fields are not tracked (no type converter configured).
func (r *Registry) fieldManager(res *resources.Resource, subresource string) *managedfields.FieldManager {
	return r.fieldManagers[fieldManagerKey{res, subresource}]
}

// trackUpdate records an update by manager in obj's managedFields, given
// the stored object live (an empty object on create).
func (r *Registry) trackUpdate(res *resources.Resource, subresource string, live, obj resources.Object, manager string) resources.Object {
	fm := r.fieldManager(res, subresource)
	if fm == nil {
		return obj
	}
	out, ok := fm.UpdateNoErrors(live, obj, manager).(resources.Object)
	if !ok {
		return obj
	}
	return out
}
