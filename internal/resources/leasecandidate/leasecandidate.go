package leasecandidate

import (
	"slices"
	"time"

	"github.com/blang/semver/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/lease"
)

// LeaseNameField is the field selector label of spec.leaseName.
const LeaseNameField = "spec.leaseName"

// New returns the description of coordination.k8s.io LeaseCandidates.
func New() *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "LeaseCandidate", ListKind: "LeaseCandidateList",
			Plural: "leasecandidates", Singular: "leasecandidate",
		},
		Namespaced: true,
		KeyPath:    "leasecandidates",
		Versions: []resources.Version{{
			GroupVersion: coordinationv1beta1.SchemeGroupVersion,
			New:          func() resources.Object { return &coordinationv1beta1.LeaseCandidate{} },
			NewList:      func() runtime.Object { return &coordinationv1beta1.LeaseCandidateList{} },
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}, {
			GroupVersion: coordinationv1alpha2.SchemeGroupVersion,
			New:          func() resources.Object { return &coordinationv1alpha2.LeaseCandidate{} },
			NewList:      func() runtime.Object { return &coordinationv1alpha2.LeaseCandidateList{} },
			Conversion:   &resources.Conversion{ToStorage: toStorage, FromStorage: fromStorage},
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{},
		Updates:  resources.UpdatePolicy{AllowCreateOnUpdate: true},
		Table:    resources.Table{Columns: columns(), Row: row},
		Fields: resources.Fields{
			Labels: append(slices.Clone(resources.MetadataFields), LeaseNameField),
			Value: func(obj resources.Object, label string) string {
				if label == LeaseNameField {
					return obj.(*coordinationv1beta1.LeaseCandidate).Spec.LeaseName
				}
				return resources.MetadataField(obj, label)
			},
		},
	}
}

// toStorage converts a v1alpha2 candidate to v1beta1: the same fields.
func toStorage(in resources.Object) (resources.Object, error) {
	c := in.(*coordinationv1alpha2.LeaseCandidate)
	out := &coordinationv1beta1.LeaseCandidate{Spec: coordinationv1beta1.LeaseCandidateSpec{
		LeaseName:        c.Spec.LeaseName,
		PingTime:         c.Spec.PingTime.DeepCopy(),
		RenewTime:        c.Spec.RenewTime.DeepCopy(),
		BinaryVersion:    c.Spec.BinaryVersion,
		EmulationVersion: c.Spec.EmulationVersion,
		Strategy:         c.Spec.Strategy,
	}}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out, nil
}

// fromStorage converts a v1beta1 candidate to v1alpha2.
func fromStorage(in resources.Object) (resources.Object, error) {
	c := in.(*coordinationv1beta1.LeaseCandidate)
	out := &coordinationv1alpha2.LeaseCandidate{Spec: coordinationv1alpha2.LeaseCandidateSpec{
		LeaseName:        c.Spec.LeaseName,
		PingTime:         c.Spec.PingTime.DeepCopy(),
		RenewTime:        c.Spec.RenewTime.DeepCopy(),
		BinaryVersion:    c.Spec.BinaryVersion,
		EmulationVersion: c.Spec.EmulationVersion,
		Strategy:         c.Spec.Strategy,
	}}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out, nil
}

// strategy holds the LeaseCandidate write rules: nothing is prepared or
// warned about; validation is ValidateLeaseCandidate and
// ValidateLeaseCandidateUpdate.
type strategy struct {
	resources.Unprepared
	resources.NoWarnings
}

func (strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	c := obj.(*coordinationv1beta1.LeaseCandidate)
	// apimachinery's metadata rules (not core's), with ConfigMap-key names.
	errs := apivalidation.ValidateObjectMetaAccessor(c, true, validName, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&c.Spec, field.NewPath("spec"))...)
	return resources.ValidateCreate(c, true, errs)
}

func (strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	c, o := obj.(*coordinationv1beta1.LeaseCandidate), old.(*coordinationv1beta1.LeaseCandidate)
	meta := resources.CheckMetaUpdate(c, o)
	errs := append(meta.Errors(), validateSpec(&c.Spec, field.NewPath("spec"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(c.Spec.LeaseName, o.Spec.LeaseName, field.NewPath("spec", "leaseName"))...)
	return resources.ValidateUpdate(c, true, meta, errs)
}

// validName is ValidLeaseCandidateName: a ConfigMap key ([-._a-zA-Z0-9]+,
// at most 253 characters, not "." or ".."), for names and generateName
// prefixes alike.
func validName(name string, _ bool) []string { return utilvalidation.IsConfigMapKey(name) }

// validateSpec is ValidateLeaseCandidateSpec. Versions are parsed as
// strict semantic versions (no leading "v"); an emulation version that is
// 0.0.0 counts as missing.
func validateSpec(spec *coordinationv1beta1.LeaseCandidateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseName == "" {
		errs = append(errs, field.Required(fldPath.Child("leaseName"), ""))
	}
	var ev, bv semver.Version
	if spec.EmulationVersion != "" {
		var err error
		if ev, err = semver.Parse(spec.EmulationVersion); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("emulationVersion"), spec.EmulationVersion, "must be a valid semantic version"))
		}
	}
	if spec.BinaryVersion == "" {
		errs = append(errs, field.Required(fldPath.Child("binaryVersion"), ""))
	} else {
		var err error
		if bv, err = semver.Parse(spec.BinaryVersion); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("binaryVersion"), spec.BinaryVersion, "must be a valid semantic version"))
		}
	}
	// An unparsable version compares as 0.0.0, as in kube-apiserver.
	if spec.BinaryVersion != "" && spec.EmulationVersion != "" && bv.LT(ev) {
		errs = append(errs, field.Invalid(fldPath.Child("binaryVersion"), spec.BinaryVersion, "must be greater than or equal to `emulationVersion`"))
	}
	if spec.Strategy == "" {
		return append(errs, field.Required(fldPath.Child("strategy"), ""))
	}
	if spec.Strategy == coordinationv1.OldestEmulationVersion && ev.EQ(semver.Version{}) {
		errs = append(errs, field.Required(fldPath.Child("emulationVersion"), "must be specified when `strategy` is 'OldestEmulationVersion'"))
	}
	return append(errs, lease.ValidateStrategy(spec.Strategy, fldPath.Child("strategy"))...)
}

// columns are kube-apiserver's, whose BinaryVersion and EmulationVersion
// descriptions are empty: it looks them up in ObjectMeta's documentation.
func columns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		resources.NameColumn(),
		{Name: "LeaseName", Type: "string", Description: coordinationv1alpha2.LeaseCandidateSpec{}.SwaggerDoc()["leaseName"]},
		{Name: "BinaryVersion", Type: "string"},
		{Name: "EmulationVersion", Type: "string"},
		resources.AgeColumn(),
	}
}

func row(obj resources.Object, now time.Time) []any {
	c := obj.(*coordinationv1beta1.LeaseCandidate)
	return []any{c.Name, c.Spec.LeaseName, c.Spec.BinaryVersion, c.Spec.EmulationVersion, resources.Age(c.CreationTimestamp, now)}
}
