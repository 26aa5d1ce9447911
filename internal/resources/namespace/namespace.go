package namespace

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// New returns the description of core v1 Namespaces, with the "status" and
// "finalize" subresources.
func New() *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "Namespace", ListKind: "NamespaceList",
			Plural: "namespaces", Singular: "namespace",
			ShortNames: []string{"ns"},
		},
		// Namespaces have no deletecollection, as in kube-apiserver.
		Verbs:   []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		KeyPath: "namespaces",
		Versions: []resources.Version{{
			GroupVersion: corev1.SchemeGroupVersion,
			New:          func() resources.Object { return &corev1.Namespace{} },
			NewList:      func() runtime.Object { return &corev1.NamespaceList{} },
			Default:      setDefaults,
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{},
		Updates:  resources.UpdatePolicy{AllowUnconditionalUpdate: true},
		// The first delete of a namespace only marks it Terminating; it
		// goes once spec.finalizers is empty too
		// (kubernetes/pkg/registry/core/namespace/storage/storage.go).
		Finalization: &resources.Finalization{Holds: holds, MarkDeleting: markDeleting},
		// kubernetes/pkg/registry/core/namespace/strategy.go GetResetFields.
		ResetFields: []string{"status"},
		Subresources: []resources.Subresource{
			{Name: "finalize", Verbs: []string{"update"}, Strategy: finalizeStrategy{}},
			{Name: "status", Verbs: []string{"get", "patch", "update"}, Strategy: statusStrategy{}, ResetFields: []string{"spec"}},
		},
		Table: resources.Table{
			Columns: []metav1.TableColumnDefinition{
				resources.NameColumn(),
				{Name: "Status", Type: "string", Description: "The status of the namespace"},
				resources.AgeColumn(),
			},
			Row: row,
		},
		// Only these two: kube-apiserver's field label conversion for
		// Namespace rejects metadata.namespace (and the legacy "name").
		Fields: resources.Fields{Labels: []string{"metadata.name", "status.phase"}, Value: fieldValue},
		// Admission reads the namespace of every create.
		ReadDecoded: true,
	}
}

// strategy holds the write rules of the namespace itself; statusStrategy
// and finalizeStrategy those of its subresources.
type (
	strategy         struct{ resources.NoWarnings }
	statusStrategy   struct{}
	finalizeStrategy struct{}
)

func (strategy) PrepareForCreate(obj resources.Object)      { prepareForCreate(obj) }
func (strategy) PrepareForUpdate(obj, old resources.Object) { prepareForUpdate(obj, old) }

func (strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validate(obj)
}

func (strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateUpdate(obj, old)
}

func (statusStrategy) PrepareForUpdate(obj, old resources.Object) { prepareForStatusUpdate(obj, old) }

func (statusStrategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateStatusUpdate(obj, old)
}

func (finalizeStrategy) PrepareForUpdate(obj, old resources.Object) {
	prepareForFinalizeUpdate(obj, old)
}

func (finalizeStrategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateFinalizeUpdate(obj, old)
}

// holds keeps a namespace not yet marked, or one whose spec.finalizers
// are not empty.
func holds(obj resources.Object) bool {
	ns := obj.(*corev1.Namespace)
	return ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating || len(ns.Spec.Finalizers) > 0
}

// markDeleting sets deletionTimestamp (unless set) and phase Terminating,
// nothing else, as kube-apiserver's namespace storage does.
func markDeleting(obj resources.Object, now time.Time) {
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		ns.DeletionTimestamp = &t
	}
	ns.Status.Phase = corev1.NamespaceTerminating
}

// setDefaults is v1 defaulting (SetDefaults_Namespace and
// SetDefaults_NamespaceStatus): the metadata.name label once the name is
// known, and phase Active when unset.
func setDefaults(obj resources.Object) {
	ns := obj.(*corev1.Namespace)
	if ns.Name != "" {
		setNameLabel(ns)
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// setNameLabel sets kubernetes.io/metadata.name to the name. kube-apiserver
// does it both in defaulting and in Canonicalize (for generated names); the
// registry here calls PrepareForCreate after name generation, so the prepare
// hooks set it.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// prepareForCreate resets status to Active and makes sure the "kubernetes"
// finalizer is present, so the namespace is only removed once its contents
// are gone.
func prepareForCreate(obj resources.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	setNameLabel(ns)
}

// prepareForUpdate keeps spec.finalizers and status as stored: only the
// finalize and status subresources change them.
func prepareForUpdate(obj, old resources.Object) {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec.Finalizers = slices.Clone(o.Spec.Finalizers)
	ns.Status = *o.Status.DeepCopy()
	setNameLabel(ns)
}

// prepareForStatusUpdate keeps the stored spec.
func prepareForStatusUpdate(obj, old resources.Object) {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec = *o.Spec.DeepCopy()
	setNameLabel(ns)
}

// prepareForFinalizeUpdate keeps the stored status. As in kube-apiserver,
// metadata and spec (which holds only finalizers) come from the request.
func prepareForFinalizeUpdate(obj, old resources.Object) {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Status = *o.Status.DeepCopy()
	setNameLabel(ns)
}

func validate(obj resources.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	return resources.ValidateCreate(ns, false, validateNamespace(ns))
}

// validateUpdate is the main strategy's ValidateUpdate: every create rule,
// then the update metadata rules.
func validateUpdate(obj, old resources.Object) field.ErrorList {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	meta := resources.CheckMetaUpdate(ns, o)
	errs := append(validateNamespace(ns), meta.CoreErrors(ns)...)
	return resources.ValidateUpdate(ns, false, meta, errs)
}

// validateNamespace is ValidateNamespace. Its spec.finalizers errors carry no
// index, unlike the finalize subresource's; see
// https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/apis/core/validation/validation.go
func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := resources.ValidateObjectMeta(ns, false, apivalidation.ValidateNamespaceName)
	p := field.NewPath("spec", "finalizers")
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), p)...)
	}
	return errs
}

func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, fldPath)
	return append(errs, resources.ValidateLegacyFinalizerName(name, fldPath)...)
}

// validateStatusUpdate is ValidateNamespaceStatusUpdate: the phase must agree
// with deletionTimestamp. The error path is "status.Phase", capital P, as
// upstream.
func validateStatusUpdate(obj, old resources.Object) field.ErrorList {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	meta := resources.CheckMetaUpdate(ns, o)
	errs := meta.CoreErrors(ns)
	phase := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return resources.ValidateUpdate(ns, false, meta, errs)
}

// validateFinalizeUpdate is ValidateNamespaceFinalizeUpdate.
func validateFinalizeUpdate(obj, old resources.Object) field.ErrorList {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	meta := resources.CheckMetaUpdate(ns, o)
	errs := meta.CoreErrors(ns)
	p := field.NewPath("spec", "finalizers")
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), p.Index(i))...)
	}
	return resources.ValidateUpdate(ns, false, meta, errs)
}

// fieldValue returns a supported field label's value: metadata.name or
// status.phase.
func fieldValue(obj resources.Object, label string) string {
	if label == "status.phase" {
		return string(obj.(*corev1.Namespace).Status.Phase)
	}
	return resources.MetadataField(obj, label)
}

func row(obj resources.Object, now time.Time) []any {
	ns := obj.(*corev1.Namespace)
	return []any{ns.Name, string(ns.Status.Phase), resources.Age(ns.CreationTimestamp, now)}
}
