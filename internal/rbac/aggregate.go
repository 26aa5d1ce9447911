package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Aggregate returns the rules role's aggregationRule gathers from roles
// (every ClusterRole), as kube-apiserver's ClusterRoleAggregation
// controller computes them: for each selector in turn, the rules of the
// roles it selects (by name, role itself excepted), each rule once. ok is
// false when role has no aggregationRule; an error is a selector that
// does not parse.
func Aggregate(role *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) (rules []rbacv1.PolicyRule, ok bool, err error) {
	if role.AggregationRule == nil {
		return nil, false, nil
	}
	rules = []rbacv1.PolicyRule{}
	sorted := slices.SortedFunc(slices.Values(roles), func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, true, err
		}
		for _, r := range sorted {
			if r.Name == role.Name || !sel.Matches(labels.Set(r.Labels)) {
				continue
			}
			for _, rule := range r.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, rule) }) {
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules, true, nil
}
