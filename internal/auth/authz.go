package auth

import (
	"errors"
	"slices"
	"strings"
)

// Mode is one authorization mode (kube-apiserver's --authorization-mode:
// RBAC, ABAC, AlwaysAllow), or leasehold's built-in default rules. A mode
// allows a request or has no opinion; none here denies.
type Mode interface {
	// Authorize decides a request; reason explains the decision (a
	// refusal's reason ends kube-apiserver's 403 message).
	Authorize(a Attributes) (d Decision, reason string)
	// RulesFor lists what u may do in namespace, for
	// SelfSubjectRulesReview. An error comes with the rules that could be
	// resolved, as kube-apiserver's RulesFor.
	RulesFor(u User, namespace string) (Rules, error)
}

// Authorizer decides whether a user may make a request, as
// kube-apiserver's authorizer chain does
// (pkg/kubeapiserver/authorizer/config.go, apiserver's union authorizer):
// members of system:masters may do everything, then each mode is asked in
// order, and the first that allows (or denies) decides. Requests no mode
// allows are refused, with the reasons of the modes joined by newlines.
type Authorizer struct {
	modes []Mode
	// mastersEverything makes RulesFor answer "everything" to members of
	// system:masters, when the modes include the built-in default rules
	// (no RBAC, whose cluster-admin binding says so itself).
	mastersEverything bool
}

// NewAuthorizer returns an Authorizer asking modes in order.
func NewAuthorizer(modes ...Mode) *Authorizer {
	z := &Authorizer{modes: modes}
	for _, m := range modes {
		if _, ok := m.(defaultPolicies); ok {
			z.mastersEverything = true
		}
	}
	return z
}

// Authorize decides a request. The decision is DecisionAllow, or another
// decision that refuses it; reason explains a refusal.
func (z *Authorizer) Authorize(a Attributes) (Decision, string) {
	if a.User.InGroup(SystemPrivilegedGroup) {
		return DecisionAllow, ""
	}
	var reasons []string
	for _, m := range z.modes {
		d, reason := m.Authorize(a)
		if d != DecisionNoOpinion {
			return d, reason
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return DecisionNoOpinion, strings.Join(reasons, "\n")
}

// RulesFor lists what u may do in namespace, for SelfSubjectRulesReview:
// the rules of every mode, and their errors joined.
func (z *Authorizer) RulesFor(u User, namespace string) (Rules, error) {
	if z.mastersEverything && u.InGroup(SystemPrivilegedGroup) {
		return everything(), nil
	}
	var out Rules
	var errs []error
	for _, m := range z.modes {
		r, err := m.RulesFor(u, namespace)
		out.Resource = append(out.Resource, r.Resource...)
		out.NonResource = append(out.NonResource, r.NonResource...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// everything is the rules of a user who may do everything.
func everything() Rules {
	return Rules{
		Resource:    []ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResource: []NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
}

// AlwaysAllow is kube-apiserver's AlwaysAllow mode: every request is
// allowed, the anonymous user's too.
func AlwaysAllow() Mode { return alwaysAllow{} }

type alwaysAllow struct{}

func (alwaysAllow) Authorize(Attributes) (Decision, string) { return DecisionAllow, "" }
func (alwaysAllow) RulesFor(User, string) (Rules, error)    { return everything(), nil }

// ABAC is the ABAC mode over a policy file (kube-apiserver's ABAC mode
// with --authorization-policy-file).
func ABAC(policies *PolicyFile) Mode { return abacMode{policies} }

type abacMode struct{ f *PolicyFile }

func (m abacMode) Authorize(a Attributes) (Decision, string) {
	return m.f.Policies().Authorize(a)
}

func (m abacMode) RulesFor(u User, namespace string) (Rules, error) {
	return m.f.Policies().RulesFor(u, namespace), nil
}

// defaultRule is one rule of a default cluster role and the groups it is
// bound to.
type defaultRule struct {
	groups []string
	verbs  []string
	// Resource rules.
	apiGroup  string
	resources []string
	// Non-resource rules.
	paths []string
}

// defaultPolicies are the rules of DefaultRules.
type defaultPolicies []defaultRule

// DefaultRules is the mode that, without RBAC, gives every user what
// kube-apiserver's default RBAC bindings give them
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go):
// system:discovery and system:basic-user to system:authenticated,
// system:public-info-viewer to system:authenticated and
// system:unauthenticated; so that discovery, kubectl auth whoami and
// kubectl auth can-i work for every user under ABAC too, as they do in a
// cluster. With RBAC, the bootstrap roles and bindings themselves do it.
// An Authorizer with these rules also lists everything as the rules of a
// member of system:masters.
func DefaultRules() Mode {
	return defaultPolicies{
		// system:discovery
		{groups: []string{AllAuthenticated}, verbs: []string{"get"}, paths: []string{
			"/livez", "/readyz", "/healthz", "/version", "/version/",
			"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
		}},
		// system:basic-user
		{groups: []string{AllAuthenticated}, verbs: []string{"create"}, apiGroup: "authorization.k8s.io", resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{groups: []string{AllAuthenticated}, verbs: []string{"create"}, apiGroup: "authentication.k8s.io", resources: []string{"selfsubjectreviews"}},
		// system:public-info-viewer
		{groups: []string{AllAuthenticated, AllUnauthenticated}, verbs: []string{"get"}, paths: []string{
			"/livez", "/readyz", "/healthz", "/version", "/version/",
		}},
	}
}

func (d defaultPolicies) Authorize(a Attributes) (Decision, string) {
	if d.allows(a) {
		return DecisionAllow, ""
	}
	return DecisionNoOpinion, ""
}

func (d defaultPolicies) allows(a Attributes) bool {
	for _, r := range d {
		if !r.boundTo(a.User) || !slices.Contains(r.verbs, a.Verb) {
			continue
		}
		if a.ResourceRequest {
			if r.paths == nil && r.apiGroup == a.APIGroup && a.Subresource == "" && slices.Contains(r.resources, a.Resource) {
				return true
			}
			continue
		}
		for _, p := range r.paths {
			if pathMatches(p, a.Path) {
				return true
			}
		}
	}
	return false
}

func (d defaultPolicies) RulesFor(u User, _ string) (Rules, error) {
	var out Rules
	for _, r := range d {
		if !r.boundTo(u) {
			continue
		}
		if r.paths != nil {
			out.NonResource = append(out.NonResource, NonResourceRule{Verbs: r.verbs, NonResourceURLs: r.paths})
		} else {
			out.Resource = append(out.Resource, ResourceRule{Verbs: r.verbs, APIGroups: []string{r.apiGroup}, Resources: r.resources})
		}
	}
	return out, nil
}

func (r defaultRule) boundTo(u User) bool {
	for _, g := range r.groups {
		if u.InGroup(g) {
			return true
		}
	}
	return false
}
