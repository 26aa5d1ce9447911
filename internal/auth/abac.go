package auth

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	kjson "sigs.k8s.io/json"
)

// Policy is one ABAC rule, in the form kube-apiserver evaluates it
// (k8s.io/kubernetes/pkg/apis/abac PolicySpec, after conversion).
type Policy struct {
	// User and Group select the subject; "*" in either (v1beta1) means
	// every authenticated user. A policy with neither matches no one.
	User  string
	Group string
	// Readonly limits the policy to get, list and watch.
	Readonly bool
	// APIGroup, Resource and Namespace select resource requests; "*"
	// matches all. An empty Namespace matches only cluster-scoped
	// requests and requests across all namespaces; an empty APIGroup only
	// the core group.
	APIGroup  string
	Resource  string
	Namespace string
	// NonResourcePath selects other requests by path: "*" for all, an
	// exact path, or a prefix ending in "*".
	NonResourcePath string
}

// PolicyList is an ABAC policy file: a request is allowed when one policy
// matches it.
type PolicyList []Policy

// Versions of the ABAC policy format.
const (
	policyGroup          = "abac.authorization.kubernetes.io"
	PolicyVersionV1beta1 = policyGroup + "/v1beta1"
	policyVersionV0      = policyGroup + "/v0"
)

// policyLine is one line of a policy file: a v1beta1 Policy
// ({"apiVersion", "kind", "spec": {...}}) or a v0 one (the fields at the
// top level, with or without apiVersion and kind).
type policyLine struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Spec       *policySpec `json:"spec"`
	// v0 fields.
	User      string `json:"user"`
	Group     string `json:"group"`
	Readonly  bool   `json:"readonly"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
}

type policySpec struct {
	User            string `json:"user"`
	Group           string `json:"group"`
	Readonly        bool   `json:"readonly"`
	APIGroup        string `json:"apiGroup"`
	Resource        string `json:"resource"`
	Namespace       string `json:"namespace"`
	NonResourcePath string `json:"nonResourcePath"`
}

// ParsePolicies parses an ABAC policy file in kube-apiserver's
// --authorization-policy-file format: one JSON object per line, blank
// lines and lines starting with "#" skipped
// (k8s.io/kubernetes/pkg/auth/authorizer/abac NewFromFile). It returns
// warnings for lines in the deprecated unversioned (v0) format.
//
// Where kube-apiserver is lenient in ways that widen access by accident,
// ParsePolicies refuses the file instead: unknown fields (a misspelt
// "namespace" would make a policy cluster-wide), an apiVersion or kind it
// does not know, and a "spec" without apiVersion and kind (kube-apiserver
// reads such a line as a v0 policy without fields, which allows every
// authenticated user everything).
func ParsePolicies(data []byte) (PolicyList, []string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	pl := PolicyList{}
	var warnings []string
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 || trimmed[0] == '#' {
			continue
		}
		p, v0, err := parsePolicy(trimmed)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %s: %w", n, line, err)
		}
		if v0 {
			warnings = append(warnings, fmt.Sprintf("line %d is an unversioned (v0) policy; use apiVersion %s", n, PolicyVersionV1beta1))
		}
		pl = append(pl, p)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return pl, warnings, nil
}

func parsePolicy(data []byte) (p Policy, v0 bool, err error) {
	var l policyLine
	strictErrs, err := kjson.UnmarshalStrict(data, &l)
	if err != nil {
		return Policy{}, false, err
	}
	if len(strictErrs) > 0 {
		return Policy{}, false, strictErrs[0]
	}
	switch {
	case l.APIVersion == PolicyVersionV1beta1 && l.Kind == "Policy":
		if l.User != "" || l.Group != "" || l.Readonly || l.Resource != "" || l.Namespace != "" {
			return Policy{}, false, fmt.Errorf("%s policies keep user, group, readonly, resource and namespace in spec", PolicyVersionV1beta1)
		}
		if l.Spec == nil {
			return Policy{}, false, fmt.Errorf("%s policy without spec", PolicyVersionV1beta1)
		}
		return convertV1beta1(*l.Spec), false, nil
	case l.APIVersion == policyVersionV0 && l.Kind == "Policy", l.APIVersion == "" && l.Kind == "":
		if l.Spec != nil {
			return Policy{}, true, fmt.Errorf("a policy with spec needs apiVersion %s and kind Policy", PolicyVersionV1beta1)
		}
		return convertV0(l), true, nil
	default:
		return Policy{}, false, fmt.Errorf("unknown apiVersion %q and kind %q (want %s, Policy)", l.APIVersion, l.Kind, PolicyVersionV1beta1)
	}
}

// convertV1beta1 is kube-apiserver's Convert_v1beta1_Policy_To_abac_Policy:
// "*" as user or group means every authenticated user.
func convertV1beta1(s policySpec) Policy {
	p := Policy(s)
	if s.User == "*" || s.Group == "*" {
		p.Group, p.User = AllAuthenticated, ""
	}
	return p
}

// convertV0 is kube-apiserver's Convert_v0_Policy_To_abac_Policy.
func convertV0(l policyLine) Policy {
	p := Policy{User: l.User, Group: l.Group, Namespace: l.Namespace, Resource: l.Resource, Readonly: l.Readonly}
	// No subject, or "*", means every authenticated user.
	if l.User == "" && l.Group == "" {
		p.Group = AllAuthenticated
	}
	if l.User == "*" || l.Group == "*" {
		p.Group, p.User = AllAuthenticated, ""
	}
	if l.Namespace == "" {
		p.Namespace = "*"
	}
	if l.Resource == "" {
		p.Resource = "*"
	}
	p.APIGroup = "*"
	if l.Namespace == "" && l.Resource == "" {
		p.NonResourcePath = "*"
	}
	return p
}

// Authorize allows the request when a policy matches it; otherwise it has
// no opinion, with kube-apiserver's reason "No policy matched.".
func (pl PolicyList) Authorize(a Attributes) (Decision, string) {
	for i := range pl {
		if pl[i].matches(a) {
			return DecisionAllow, ""
		}
	}
	return DecisionNoOpinion, "No policy matched."
}

// matches is kube-apiserver's ABAC matching
// (k8s.io/kubernetes/pkg/auth/authorizer/abac/abac.go). Subresources are
// matched by their resource alone, as there.
func (p *Policy) matches(a Attributes) bool {
	if !p.subjectMatches(a.User) {
		return false
	}
	// Every policy allows the read-only verbs; writes need readonly false.
	if !a.IsReadOnly() && p.Readonly {
		return false
	}
	if a.ResourceRequest {
		return (p.Namespace == "*" || p.Namespace == a.Namespace) &&
			(p.Resource == "*" || p.Resource == a.Resource) &&
			(p.APIGroup == "*" || p.APIGroup == a.APIGroup)
	}
	return pathMatches(p.NonResourcePath, a.Path)
}

func (p *Policy) subjectMatches(u User) bool {
	matched := false
	if p.User != "" {
		if p.User != "*" && p.User != u.Name {
			return false
		}
		matched = true
	}
	if p.Group != "" {
		if p.Group != "*" && !u.InGroup(p.Group) {
			return false
		}
		matched = true
	}
	return matched
}

// pathMatches matches a non-resource path against a rule path: "*", the
// exact path, or a prefix ending in "*".
func pathMatches(rule, path string) bool {
	switch {
	case rule == "":
		return false
	case rule == "*", rule == path:
		return true
	case strings.HasSuffix(rule, "*"):
		return strings.HasPrefix(path, strings.TrimRight(rule, "*"))
	}
	return false
}

// RulesFor lists the rules of the policies that apply to u in namespace,
// as kube-apiserver's ABAC RulesFor does.
func (pl PolicyList) RulesFor(u User, namespace string) Rules {
	var r Rules
	for i := range pl {
		p := &pl[i]
		if !p.subjectMatches(u) || p.Namespace != "*" && p.Namespace != namespace {
			continue
		}
		verbs := []string{"*"}
		if p.Readonly {
			verbs = []string{"get", "list", "watch"}
		}
		if p.Resource != "" {
			r.Resource = append(r.Resource, ResourceRule{Verbs: verbs, APIGroups: []string{p.APIGroup}, Resources: []string{p.Resource}})
		}
		if p.NonResourcePath != "" {
			r.NonResource = append(r.NonResource, NonResourceRule{Verbs: verbs, NonResourceURLs: []string{p.NonResourcePath}})
		}
	}
	return r
}

// PolicyFile is an ABAC policy file, re-read when it changes.
type PolicyFile struct {
	src *fileSource[PolicyList]
}

// NewPolicyFile loads the policy file at path. It fails when the file
// cannot be read or parsed; later, a file that fails keeps the previous
// policies.
func NewPolicyFile(path string, reload Reload) (*PolicyFile, error) {
	reload = reload.withDefaults()
	log := reload.Logger
	parse := func(data []byte) (PolicyList, error) {
		pl, warnings, err := ParsePolicies(data)
		for _, w := range warnings {
			log.Warn("authorization policy file: "+w, "path", path)
		}
		return pl, err
	}
	src, err := newFileSource(path, "authorization policy file", parse, reload)
	if err != nil {
		return nil, err
	}
	return &PolicyFile{src: src}, nil
}

// Policies returns the policies in force.
func (f *PolicyFile) Policies() PolicyList { return f.src.get() }

// Run re-reads the file when it changes, until ctx ends.
func (f *PolicyFile) Run(ctx context.Context) error { return f.src.Run(ctx) }
