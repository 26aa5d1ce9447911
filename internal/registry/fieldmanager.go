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

// trackUpdate records an update by manager in obj's managedFields, given
// the stored object live (an empty object on create); both are of res's
// version.
func (r *Registry) trackUpdate(res resources.Resource, subresource string, live, obj resources.Object, manager string) resources.Object {
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
