package registry

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// returns objects of the request's version, and managedFields recorded at
// other versions are converted by the kind's own conversions (see
// versionConvertor), also between groups.
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
			fm, err := managedfields.NewDefaultFieldManager(tc, versionConvertor{k, scheme}, defaulter{res}, scheme,
				res.GroupVersionKind(), res.GroupVersion(), sub, resetFields)
			if err != nil {
				return nil, fmt.Errorf("field manager for %s %q: %w", res.GroupVersionResource(), sub, err)
			}
			out[fieldManagerKey{i, sub}] = fm
		}
	}
	return out, nil
}

// versionConvertor converts objects between the served versions of one
// kind, through its storage version, for the field managers. The scheme
// cannot do it across groups: its ConvertToVersion only targets versions
// of the object's own group, and the field managers would then drop, as
// belonging to a version no longer served, the managedFields recorded at
// the kind's versions in other groups (core v1 and events.k8s.io/v1
// Events). kube-apiserver converts them through an internal type the two
// groups share.
type versionConvertor struct {
	kind   *resources.Kind
	scheme *runtime.Scheme
}

// ConvertToVersion converts in, an object of one of the kind's versions,
// to the version target selects among them (the storage version when it
// selects none, as the field managers' hub), with apiVersion and kind
// set. The result is a new object: in is not modified.
func (c versionConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	from := c.versionOf(in)
	if from == nil {
		return c.scheme.ConvertToVersion(in, target)
	}
	gvks := make([]schema.GroupVersionKind, len(c.kind.Versions))
	for i, v := range c.kind.Versions {
		gvks[i] = v.WithKind(c.kind.Names.Kind)
	}
	to := &c.kind.Versions[0]
	if gvk, ok := target.KindForGroupVersionKinds(gvks); ok {
		for i := range c.kind.Versions {
			if c.kind.Versions[i].GroupVersion == gvk.GroupVersion() {
				to = &c.kind.Versions[i]
			}
		}
	}
	out, err := c.convert(in.(resources.Object), from, to)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(to.WithKind(c.kind.Names.Kind))
	return out, nil
}

// convert converts in from one version to another through the storage
// version. Conversions make new objects, so only a conversion to the same
// version needs a copy.
func (c versionConvertor) convert(in resources.Object, from, to *resources.Version) (resources.Object, error) {
	if from == to {
		return in.DeepCopyObject().(resources.Object), nil
	}
	stored, err := resources.Resource{Kind: c.kind, Version: from}.ToStorage(in)
	if err != nil {
		return nil, err
	}
	return resources.Resource{Kind: c.kind, Version: to}.FromStorage(stored)
}

// versionOf returns the version of the kind whose Go type obj has, nil
// when none has.
func (c versionConvertor) versionOf(obj runtime.Object) *resources.Version {
	t := reflect.TypeOf(obj)
	for i := range c.kind.Versions {
		if reflect.TypeOf(c.kind.Versions[i].New()) == t {
			return &c.kind.Versions[i]
		}
	}
	return nil
}

func (c versionConvertor) Convert(in, out, context any) error {
	return c.scheme.Convert(in, out, context)
}

func (c versionConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return c.scheme.ConvertFieldLabel(gvk, label, value)
}

// defaulter applies a version's defaults to the objects server-side apply
// builds, as the scheme's defaulting functions do in kube-apiserver.
type defaulter struct{ res resources.Resource }

func (d defaulter) Default(obj runtime.Object) {
	if o, ok := obj.(resources.Object); ok {
		d.res.Default(o)
	}
}

// fieldManager returns the field manager of res (or of a subresource).
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
