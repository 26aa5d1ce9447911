package rbac

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/leasehold/leasehold/internal/auth"
)

// Authorizer is the RBAC authorization mode.
type Authorizer struct {
	r *Resolver
}

var _ auth.Mode = (*Authorizer)(nil)

// NewAuthorizer returns the RBAC mode over src.
func NewAuthorizer(src Source) *Authorizer {
	return &Authorizer{r: NewResolver(src)}
}

// Authorize allows a request one of the user's rules allows, with
// kube-apiserver's reason naming the binding ("RBAC: allowed by
// ClusterRoleBinding ..."); otherwise it has no opinion, and the reason
// lists the roles that could not be found, if any ("RBAC: role... not
// found"), else is empty.
func (z *Authorizer) Authorize(a auth.Attributes) (auth.Decision, string) {
	var (
		allowedBy RuleSource
		allowed   bool
		errs      []error
	)
	z.r.VisitRulesFor(a.User, a.Namespace, func(source RuleSource, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(&a, rule) {
			allowedBy, allowed = source, true
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowed {
		return auth.DecisionAllow, "RBAC: allowed by " + allowedBy.String()
	}
	if len(errs) > 0 {
		return auth.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return auth.DecisionNoOpinion, ""
}

// RulesFor lists the user's rules in namespace, as kube-apiserver's RBAC
// RulesFor: each rule with resources as a resource rule, each with
// non-resource URLs as a non-resource rule.
func (z *Authorizer) RulesFor(u auth.User, namespace string) (auth.Rules, error) {
	rules, err := z.r.RulesFor(u, namespace)
	var out auth.Rules
	for _, r := range rules {
		if len(r.Resources) > 0 {
			out.Resource = append(out.Resource, auth.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
		if len(r.NonResourceURLs) > 0 {
			out.NonResource = append(out.NonResource, auth.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		}
	}
	return out, err
}
