package rbac

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/leasehold/leasehold/internal/auth"
)

// ConfirmNoEscalation returns nil when the rules u holds in namespace
// ("" for cluster-wide) cover rules, and otherwise kube-apiserver's error
// listing what is missing (pkg/registry/rbac/validation/rule.go):
//
//	user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//	{APIGroups:["coordination.k8s.io"], Resources:["leases"], Verbs:["delete"]}
//
// Roles that could not be resolved are named after the list.
func ConfirmNoEscalation(r *Resolver, u auth.User, namespace string, rules []rbacv1.PolicyRule) error {
	owner, err := r.RulesFor(u, namespace)
	covered, missing := validation.Covers(owner, rules)
	if covered {
		return nil
	}
	missing = CompactRules(missing)
	var lines []string
	for _, m := range missing {
		lines = append(lines, CompactString(m))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(lines, "\n"))
	if err != nil {
		msg += fmt.Sprintf("; resolution errors: %v", []error{err})
	}
	return errors.New(msg)
}

// CompactRules merges the rules that name one API group and one resource
// (and at most one resource name) and differ only in their verbs, as
// kube-apiserver's CompactRules does to word escalation errors.
func CompactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct {
		group, resource, name string
		named                 bool
	}
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	merged := map[simple]*rbacv1.PolicyRule{}
	var order []simple
	for _, rule := range rules {
		key, ok := simpleRule(&rule)
		if !ok {
			out = append(out, rule)
			continue
		}
		k := simple{group: key.APIGroups[0], resource: key.Resources[0]}
		if len(key.ResourceNames) == 1 {
			k.name, k.named = key.ResourceNames[0], true
		}
		if m, ok := merged[k]; ok {
			m.Verbs = append(m.Verbs, rule.Verbs...)
			continue
		}
		merged[k] = rule.DeepCopy()
		order = append(order, k)
	}
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out
}

// simpleRule reports whether a rule has verbs, one API group, one
// resource, at most one resource name, and nothing else.
func simpleRule(rule *rbacv1.PolicyRule) (*rbacv1.PolicyRule, bool) {
	if len(rule.ResourceNames) > 1 || len(rule.NonResourceURLs) > 0 || len(rule.APIGroups) != 1 || len(rule.Resources) != 1 {
		return nil, false
	}
	s := &rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: rule.Resources, Verbs: rule.Verbs, ResourceNames: rule.ResourceNames}
	return rule, reflect.DeepEqual(s, rule)
}

// CompactString is kube-apiserver's compact form of a rule in escalation
// errors: {APIGroups:["g"], Resources:["r"], ResourceNames:["n"], Verbs:["v"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
