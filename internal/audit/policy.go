package audit

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditinstall "k8s.io/apiserver/pkg/apis/audit/install"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/apis/audit/validation"

	"github.com/leasehold/leasehold/internal/auth"
)

// Policy decides what is recorded of each request: the first rule that
// matches it gives the level and the stages left out, as kube-apiserver's
// policy checker (apiserver/pkg/audit/policy/checker.go); no rule is
// level None.
type Policy struct {
	rules []rule
	// omitStages and omitManagedFields apply when no rule matches.
	omitStages        stages
	omitManagedFields bool
}

type rule struct {
	auditinternal.PolicyRule
	omitStages        stages
	omitManagedFields bool
}

// stages is a set of stages.
type stages uint8

const (
	stageRequestReceived stages = 1 << iota
	stageResponseStarted
	stageResponseComplete
	stagePanic
)

func stageBit(s auditv1.Stage) stages {
	switch s {
	case auditv1.StageRequestReceived:
		return stageRequestReceived
	case auditv1.StageResponseStarted:
		return stageResponseStarted
	case auditv1.StageResponseComplete:
		return stageResponseComplete
	case auditv1.StagePanic:
		return stagePanic
	}
	return 0
}

func stagesOf(l []auditinternal.Stage) stages {
	var s stages
	for _, st := range l {
		s |= stageBit(auditv1.Stage(st))
	}
	return s
}

// LoadPolicy reads a policy file as kube-apiserver does
// (apiserver/pkg/audit/policy/reader.go): YAML or JSON, apiVersion
// audit.k8s.io/v1 and kind Policy, strictly decoded (unknown fields are
// only warned about), validated, with at least one rule.
func LoadPolicy(path string) (*Policy, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read file path %q: %w", path, err)
	}
	p, warnings, err := ParsePolicy(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%v: from file %v", err, path)
	}
	return p, warnings, nil
}

// ParsePolicy parses a policy file's content; see LoadPolicy.
func ParsePolicy(data []byte) (*Policy, []string, error) {
	scheme := runtime.NewScheme()
	auditinstall.Install(scheme)
	var warnings []string
	policy := &auditinternal.Policy{}
	_, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, policy)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return nil, nil, fmt.Errorf("failed decoding: %w", err)
		}
		var lerr error
		if _, gvk, lerr = serializer.NewCodecFactory(scheme).UniversalDecoder(auditv1.SchemeGroupVersion).Decode(data, nil, policy); lerr != nil {
			return nil, nil, fmt.Errorf("failed lenient decoding: %w", lerr)
		}
		warnings = append(warnings, fmt.Sprintf("Audit policy contains errors, falling back to lenient decoding: %v", err))
	}
	if gvk == nil || (schema.GroupVersion{Group: gvk.Group, Version: gvk.Version}) != auditv1.SchemeGroupVersion {
		return nil, nil, fmt.Errorf("unknown group version field %v in policy", gvk)
	}
	if errs := validation.ValidatePolicy(policy); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	if len(policy.Rules) == 0 {
		return nil, nil, fmt.Errorf("loaded illegal policy with 0 rules")
	}
	p := &Policy{omitStages: stagesOf(policy.OmitStages), omitManagedFields: policy.OmitManagedFields}
	for _, r := range policy.Rules {
		omf := policy.OmitManagedFields
		if r.OmitManagedFields != nil {
			omf = *r.OmitManagedFields
		}
		p.rules = append(p.rules, rule{PolicyRule: r, omitStages: p.omitStages | stagesOf(r.OmitStages), omitManagedFields: omf})
	}
	return p, warnings, nil
}

// config is what the policy decides for one request.
type config struct {
	level             auditv1.Level
	omitStages        stages
	omitManagedFields bool
}

// evaluate returns the policy's decision for a request. hasUser is false
// for requests that failed authentication.
func (p *Policy) evaluate(a *auth.Attributes, hasUser bool) config {
	for i := range p.rules {
		r := &p.rules[i]
		if r.matches(a, hasUser) {
			return config{level: auditv1.Level(r.Level), omitStages: r.omitStages, omitManagedFields: r.omitManagedFields}
		}
	}
	return config{level: auditv1.LevelNone, omitStages: p.omitStages, omitManagedFields: p.omitManagedFields}
}

// matches is kube-apiserver's ruleMatches.
func (r *rule) matches(a *auth.Attributes, hasUser bool) bool {
	if len(r.Users) > 0 && (!hasUser || !slices.Contains(r.Users, a.User.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if !hasUser || !slices.ContainsFunc(a.User.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) }) {
			return false
		}
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return r.matchesResource(a)
	}
	if len(r.NonResourceURLs) > 0 {
		return r.matchesNonResource(a)
	}
	return true
}

func (r *rule) matchesNonResource(a *auth.Attributes) bool {
	if a.ResourceRequest {
		return false
	}
	for _, spec := range r.NonResourceURLs {
		if spec == "*" || spec == a.Path || strings.HasSuffix(spec, "*") && strings.HasPrefix(a.Path, strings.TrimRight(spec, "*")) {
			return true
		}
	}
	return false
}

func (r *rule) matchesResource(a *auth.Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined = a.Resource + "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup && gr.Group != "*" {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		for _, res := range gr.Resources {
			if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, a.Name) {
				continue
			}
			switch {
			case res == combined || res == "*":
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && a.Subresource == strings.TrimPrefix(res, "*/"):
				return true
			case strings.HasSuffix(res, "/*") && a.Resource == strings.TrimSuffix(res, "/*"):
				return true
			}
		}
	}
	return false
}
