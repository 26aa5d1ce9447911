package auth

import "slices"

// Authorizer decides whether a user may make a request. It allows:
//
//  1. members of system:masters, everything (kube-apiserver's privileged
//     group authorizer, always first);
//  2. everyone, what kube-apiserver's default RBAC bindings allow
//     (newDefaultPolicies): discovery, OpenAPI, health and version for
//     authenticated users, health and version for anonymous ones, and the
//     self reviews (whoami, can-i) for authenticated users;
//  3. with a policy file, what its ABAC policies allow; without one, every
//     authenticated user everything (kube-apiserver's AlwaysAllow, except
//     that the anonymous user gets only 2.).
//
// Requests nothing allows are refused; with a policy file the reason is
// ABAC's "No policy matched.".
type Authorizer struct {
	policies *PolicyFile
	defaults defaultPolicies
}

// NewAuthorizer returns an Authorizer; policies nil lets every
// authenticated user do everything.
func NewAuthorizer(policies *PolicyFile) *Authorizer {
	return &Authorizer{policies: policies, defaults: newDefaultPolicies()}
}

// Authorize decides a request. The decision is DecisionAllow or
// DecisionNoOpinion (which refuses); reason explains a refusal.
func (z *Authorizer) Authorize(a Attributes) (Decision, string) {
	if a.User.InGroup(SystemPrivilegedGroup) {
		return DecisionAllow, ""
	}
	if z.defaults.allows(a) {
		return DecisionAllow, ""
	}
	if z.policies == nil {
		if a.User.InGroup(AllAuthenticated) {
			return DecisionAllow, ""
		}
		return DecisionNoOpinion, ""
	}
	return z.policies.Policies().Authorize(a)
}

// RulesFor lists what u may do in namespace, for SelfSubjectRulesReview.
func (z *Authorizer) RulesFor(u User, namespace string) Rules {
	everything := Rules{
		Resource:    []ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResource: []NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
	if u.InGroup(SystemPrivilegedGroup) || z.policies == nil && u.InGroup(AllAuthenticated) {
		return everything
	}
	r := z.defaults.rulesFor(u)
	if z.policies != nil {
		pr := z.policies.Policies().RulesFor(u, namespace)
		r.Resource = append(r.Resource, pr.Resource...)
		r.NonResource = append(r.NonResource, pr.NonResource...)
	}
	return r
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

// defaultPolicies are rules that apply with or without a policy file.
type defaultPolicies []defaultRule

// newDefaultPolicies returns the rules kube-apiserver's default RBAC bindings give
// every user (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go):
// system:discovery and system:basic-user to system:authenticated,
// system:public-info-viewer to system:authenticated and
// system:unauthenticated. leasehold applies them with or without a policy
// file, so that discovery, kubectl auth whoami and kubectl auth can-i work
// for every user, as they do in a cluster.
func newDefaultPolicies() defaultPolicies {
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

func (d defaultPolicies) rulesFor(u User) Rules {
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
	return out
}

func (r defaultRule) boundTo(u User) bool {
	for _, g := range r.groups {
		if u.InGroup(g) {
			return true
		}
	}
	return false
}
