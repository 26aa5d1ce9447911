package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validate/content"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
)

// The validation below is kube-apiserver's pkg/apis/rbac/validation
// (v1.36), on the v1 types, whose fields are the internal ones.

// rbacName is ValidateRBACName: a name must be usable as a path segment.
// Upstream checks a generateName the same way, not as a prefix.
func rbacName(name string, _ bool) []string { return apivalidation.IsPathSegmentName(name) }

var rulesPath = field.NewPath("rules")

func validateRole(r *rbacv1.Role) field.ErrorList {
	errs := resources.ValidateObjectMeta(r, true, rbacName)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, true, rulesPath.Index(i))...)
	}
	return errs
}

func validateRoleUpdate(r, old *rbacv1.Role) field.ErrorList {
	return append(validateRole(r), resources.CheckMetaUpdate(r, old).CoreErrors(r)...)
}

// validateClusterRole checks a ClusterRole; allowInvalidLabelValue is
// set on updates of a role whose stored selectors already have label
// values that would be refused today.
func validateClusterRole(r *rbacv1.ClusterRole, allowInvalidLabelValue bool) field.ErrorList {
	errs := resources.ValidateObjectMeta(r, false, rbacName)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, false, rulesPath.Index(i))...)
	}
	if r.AggregationRule != nil {
		selectorsPath := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(selectorsPath, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			p := selectorsPath.Index(i)
			errs = append(errs, metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i], opts, p)...)
			// Upstream reports the selector the conversion returned
			// (nil on error) as the bad value.
			sel, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i])
			if err != nil {
				errs = append(errs, field.Invalid(p, sel, "invalid label selector."))
			}
		}
	}
	return errs
}

func validateClusterRoleUpdate(r, old *rbacv1.ClusterRole, allowInvalidLabelValue bool) field.ErrorList {
	return append(validateClusterRole(r, allowInvalidLabelValue), resources.CheckMetaUpdate(r, old).CoreErrors(r)...)
}

// hasInvalidLabelValueInSelector is the clusterrole strategy's check of
// the stored role on update.
func hasInvalidLabelValueInSelector(r *rbacv1.ClusterRole) bool {
	if r.AggregationRule == nil {
		return false
	}
	opts := metav1validation.LabelSelectorValidationOptions{}
	for i := range r.AggregationRule.ClusterRoleSelectors {
		if len(metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i], opts, nil)) > 0 {
			return true
		}
	}
	return false
}

// validatePolicyRule is ValidatePolicyRule.
func validatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func validateRoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := resources.ValidateObjectMeta(b, true, rbacName)
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	return append(errs, validateSubjects(b.Subjects, true)...)
}

func validateRoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	errs := append(validateRoleBinding(b), resources.CheckMetaUpdate(b, old).CoreErrors(b)...)
	return append(errs, validateRoleRefUnchanged(b.RoleRef, old.RoleRef)...)
}

func validateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := resources.ValidateObjectMeta(b, false, rbacName)
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"ClusterRole"})...)
	return append(errs, validateSubjects(b.Subjects, false)...)
}

func validateClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := append(validateClusterRoleBinding(b), resources.CheckMetaUpdate(b, old).CoreErrors(b)...)
	return append(errs, validateRoleRefUnchanged(b.RoleRef, old.RoleRef)...)
}

// validateRoleRef checks a binding's roleRef; kinds are the kinds it may
// name.
func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range rbacName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateRoleRefUnchanged(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref == old {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
}

func validateSubjects(subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("subjects")
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, p.Index(i))...)
	}
	return errs
}

// validateSubject is ValidateRoleBindingSubject.
func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range genericvalidation.ValidateServiceAccountName(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}
