package namespace

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
)

// New returns the description of core v1 Namespaces, with the "status" and
// "finalize" subresources.
func New() *resources.Resource {
	return &resources.Resource{
		Group:      "",
		Version:    "v1",
		Kind:       "Namespace",
		ListKind:   "NamespaceList",
		Plural:     "namespaces",
		Singular:   "namespace",
		ShortNames: []string{"ns"},
		Namespaced: false,
		// Namespaces have no deletecollection, as in kube-apiserver.
		Verbs:   []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		KeyPath: "namespaces",
		// A namespace goes only once spec.finalizers is empty too
		// (kubernetes/pkg/registry/core/namespace/storage
		// ShouldDeleteNamespaceDuringUpdate).
		Finalizing: func(obj resources.Object) bool {
			return len(obj.(*corev1.Namespace).Spec.Finalizers) > 0
		},

		New:     func() resources.Object { return &corev1.Namespace{} },
		NewList: func() runtime.Object { return &corev1.NamespaceList{} },

		AllowCreateOnUpdate:      false,
		AllowUnconditionalUpdate: true,

		Default:          setDefaults,
		PrepareForCreate: prepareForCreate,
		PrepareForUpdate: prepareForUpdate,
		Validate:         validate,
		ValidateUpdate:   validateUpdate,

		// kubernetes/pkg/registry/core/namespace/strategy.go GetResetFields.
		ResetFields: []string{"status"},
		Subresources: map[string]resources.Subresource{
			"status": {
				PrepareForUpdate: prepareForStatusUpdate,
				ValidateUpdate:   validateStatusUpdate,
				ResetFields:      []string{"spec"},
			},
			"finalize": {
				PrepareForUpdate: prepareForFinalizeUpdate,
				ValidateUpdate:   validateFinalizeUpdate,
			},
		},

		// Only these two: kube-apiserver's field label conversion for
		// Namespace rejects metadata.namespace (and the legacy "name").
		FieldLabels: []string{"metadata.name", "status.phase"},
		Field:       fieldValue,

		Columns: []metav1.TableColumnDefinition{
			resources.NameColumn(),
			{Name: "Status", Type: "string", Description: "The status of the namespace"},
			resources.AgeColumn(),
		},
		Row: row,
	}
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
