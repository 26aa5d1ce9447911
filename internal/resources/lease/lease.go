package lease

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// Options configures the Lease description.
type Options struct {
	// CoordinatedLeaderElection mirrors kube-apiserver's feature gate of the
	// same name (off by default there). When false, spec.strategy and
	// spec.preferredHolder are dropped from writes; when true they are kept
	// and validated.
	CoordinatedLeaderElection bool
}

// New returns the description of coordination.k8s.io/v1 Leases.
func New(opts Options) *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "Lease", ListKind: "LeaseList",
			Plural: "leases", Singular: "lease",
		},
		Namespaced: true,
		KeyPath:    "leases",
		Versions: []resources.Version{{
			GroupVersion: coordinationv1.SchemeGroupVersion,
			New:          func() resources.Object { return &coordinationv1.Lease{} },
			NewList:      func() runtime.Object { return &coordinationv1.LeaseList{} },
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{gated: !opts.CoordinatedLeaderElection},
		Updates:  resources.UpdatePolicy{AllowCreateOnUpdate: true},
		Table:    resources.Table{Columns: columns(), Row: row},
		Fields:   resources.Fields{Labels: resources.MetadataFields, Value: resources.MetadataField},
	}
}

// strategy holds the Lease write rules. gated drops the coordinated
// election fields, as kube-apiserver does while its feature gate is off.
type strategy struct {
	resources.NoWarnings
	gated bool
}

// PrepareForCreate clears the coordinated-election fields while the gate
// is off.
func (s strategy) PrepareForCreate(obj resources.Object) {
	if !s.gated {
		return
	}
	l := obj.(*coordinationv1.Lease)
	l.Spec.Strategy = nil
	l.Spec.PreferredHolder = nil
}

// PrepareForUpdate clears each coordinated-election field while the gate
// is off, unless the stored object already uses it, so data written while
// the gate was on survives.
func (s strategy) PrepareForUpdate(obj, old resources.Object) {
	if !s.gated {
		return
	}
	l, o := obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease)
	if o.Spec.Strategy == nil {
		l.Spec.Strategy = nil
	}
	if o.Spec.PreferredHolder == nil {
		l.Spec.PreferredHolder = nil
	}
}

func (strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validate(obj)
}

func (strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateUpdate(obj, old)
}

func validate(obj resources.Object) field.ErrorList {
	l := obj.(*coordinationv1.Lease)
	// Lease uses apimachinery's metadata rules, not core's: finalizers
	// without "/" are accepted.
	errs := apivalidation.ValidateObjectMetaAccessor(l, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&l.Spec, field.NewPath("spec"))...)
	return resources.ValidateCreate(l, true, errs)
}

func validateUpdate(obj, old resources.Object) field.ErrorList {
	l, o := obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease)
	meta := resources.CheckMetaUpdate(l, o)
	errs := append(meta.Errors(), validateSpec(&l.Spec, field.NewPath("spec"))...)
	return resources.ValidateUpdate(l, true, meta, errs)
}

// validateSpec is ValidateLeaseSpec; the same rules apply on create and
// update and no field is immutable.
func validateSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// kube-apiserver passes the *int32 as the bad value; the int32 renders
	// the same and keeps no reference into the object.
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, ValidateStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

var validStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// ValidateStrategy is ValidateCoordinatedLeaseStrategy, which Lease and
// LeaseCandidate share. It appends "strategy" to a path that already ends
// in "strategy", so errors land on spec.strategy.strategy; see
// https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/apis/coordination/validation/validation.go
// The bad value keeps its named string type: kube-apiserver renders it as
// JSON, which escapes differently from the %q used for plain strings.
func ValidateStrategy(s coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	p := fldPath.Child("strategy")
	if !strings.Contains(string(s), "/") {
		for _, v := range validStrategies {
			if s == v {
				return nil
			}
		}
		return append(errs, field.NotSupported(p, s, validStrategies))
	}
	for _, msg := range utilvalidation.IsQualifiedName(string(s)) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	spec := coordinationv1.LeaseSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		resources.NameColumn(),
		{Name: "Holder", Type: "string", Description: spec["holderIdentity"]},
		resources.AgeColumn(),
		// Ours, not kube-apiserver's: shown by kubectl get -o wide.
		{Name: "Duration", Type: "string", Priority: 1, Description: spec["leaseDurationSeconds"]},
		{Name: "Renewed", Type: "string", Priority: 1, Description: "Time since renewTime. " + spec["renewTime"]},
		// A string column: its cells may be "<none>".
		{Name: "Transitions", Type: "string", Priority: 1, Description: spec["leaseTransitions"]},
		{Name: "Expired", Type: "string", Priority: 1, Description: "Whether the lease has a holder whose renewTime plus leaseDurationSeconds is not after the server's current time, or who lacks either; a lease without a holder is released, not expired."},
	}
}

const none = "<none>"

func row(obj resources.Object, now time.Time) []any {
	l := obj.(*coordinationv1.Lease)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []any{
		l.Name,
		holder,
		resources.Age(l.CreationTimestamp, now),
		leaseDuration(l.Spec.LeaseDurationSeconds),
		renewed(l.Spec.RenewTime, now),
		transitions(l.Spec.LeaseTransitions),
		strconv.FormatBool(Expired(&l.Spec, now)),
	}
}

func leaseDuration(d *int32) string {
	if d == nil {
		return none
	}
	return fmt.Sprintf("%ds", *d)
}

func renewed(t *metav1.MicroTime, now time.Time) string {
	if t == nil {
		return none
	}
	return resources.Age(metav1.Time{Time: t.Time}, now)
}

func transitions(n *int32) string {
	if n == nil {
		return none
	}
	return strconv.Itoa(int(*n))
}
