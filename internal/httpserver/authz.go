package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/auth"
)

// Authorizer decides whether a request is allowed. Decisions other than
// auth.DecisionAllow refuse it; reason tells why.
type Authorizer interface {
	Authorize(a auth.Attributes) (decision auth.Decision, reason string)
	// RulesFor lists what u may do in namespace (SelfSubjectRulesReview).
	RulesFor(u auth.User, namespace string) auth.Rules
}

// requestAttributes describes a request for authorization as
// kube-apiserver's RequestInfoFactory does
// (apiserver/pkg/endpoints/request/requestinfo.go): /api/{version}/... and
// /apis/{group}/{version}/... with at least a resource are resource
// requests, with a Kubernetes verb; everything else (discovery documents,
// /openapi, /debug/pprof) is a non-resource request whose verb is the
// lower-case HTTP method. The quirks are kube-apiserver's: a namespace's
// own path names it as the namespace too, and a list or watch whose field
// selector fixes metadata.name is authorized with that name.
func requestAttributes(req *http.Request) auth.Attributes {
	a := auth.Attributes{Path: req.URL.Path, Verb: strings.ToLower(req.Method)}
	parts := splitPath(req.URL.Path)
	if len(parts) < 3 || parts[0] != "api" && parts[0] != "apis" {
		return a
	}
	prefix := parts[0]
	parts = parts[1:]
	if prefix == "apis" {
		if len(parts) < 3 {
			return a
		}
		a.APIGroup = parts[0]
		parts = parts[1:]
	}
	a.ResourceRequest = true
	a.APIVersion = parts[0]
	parts = parts[1:]

	if parts[0] == "watch" || parts[0] == "proxy" {
		a.Verb = parts[0]
		parts = parts[1:]
		if len(parts) == 0 {
			// kube-apiserver fails such a request (500); leasehold
			// authorizes it without a resource, and the router answers
			// 404.
			return a
		}
	} else {
		switch req.Method {
		case http.MethodPost:
			a.Verb = "create"
		case http.MethodGet, http.MethodHead:
			a.Verb = "get"
		case http.MethodPut:
			a.Verb = "update"
		case http.MethodPatch:
			a.Verb = "patch"
		case http.MethodDelete:
			a.Verb = "delete"
		default:
			a.Verb = ""
		}
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		a.Namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	switch {
	case len(parts) >= 3 && a.Verb != "proxy":
		a.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		a.Name = parts[1]
		fallthrough
	case len(parts) >= 1:
		a.Resource = parts[0]
	}
	if a.Name == "" && a.Verb == "get" {
		var opts metainternalversion.ListOptions
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
			// As kube-apiserver: a list, unless watch is set.
			opts = metainternalversion.ListOptions{Watch: isWatch(req)}
		}
		a.Verb = "list"
		if opts.Watch {
			a.Verb = "watch"
		}
		if opts.FieldSelector != nil {
			if name, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); ok && len(content.IsPathSegmentName(name)) == 0 {
				a.Name = name
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	return a
}

// longRunning reports whether a request may outlive the request timeout
// and is exempt from it and from the in-flight limits: watches and
// profiles, as kube-apiserver's BasicLongRunningRequestCheck decides.
func longRunning(a auth.Attributes) bool {
	return a.Verb == "watch" || !a.ResourceRequest && strings.HasPrefix(a.Path, "/debug/pprof/")
}

// mutating reports whether a request counts against the mutating
// in-flight limit: every verb but get, list and watch.
func mutating(a auth.Attributes) bool { return !a.IsReadOnly() }

// authorize refuses a request the authorizer does not allow, with
// kube-apiserver's 403. A PUT that would create its object (and a
// server-side apply that would) also needs the create verb, as in
// kube-apiserver's update and patch handlers.
func (s *Server) authorize(ctx context.Context, req *http.Request, a auth.Attributes) error {
	if s.authz == nil {
		return nil
	}
	if d, reason := s.authz.Authorize(a); d != auth.DecisionAllow {
		return forbidden(a, reason)
	}
	return s.authorizeCreateOnUpdate(ctx, req, a)
}

// authorizeCreateOnUpdate checks create for a PUT (or apply PATCH) to a
// missing object, before the handler runs. kube-apiserver checks inside
// the storage update, when it finds the object missing; here the object
// is looked up first, so a delete racing with the request can let the PUT
// create without the check. With ABAC that cannot matter: a policy that
// allows update allows create.
func (s *Server) authorizeCreateOnUpdate(ctx context.Context, req *http.Request, a auth.Attributes) error {
	if !a.ResourceRequest || a.Subresource != "" || a.Name == "" {
		return nil
	}
	switch {
	case a.Verb == "update":
	case a.Verb == "patch" && strings.HasPrefix(strings.TrimSpace(req.Header.Get("Content-Type")), string(types.ApplyYAMLPatchType)):
	default:
		return nil
	}
	res := s.resources[resourceKey{a.APIGroup, a.APIVersion, a.Resource}]
	if res == nil || a.Verb == "update" && !res.AllowCreateOnUpdate || s.reg == nil {
		return nil
	}
	create := a
	create.Verb = "create"
	d, reason := s.authz.Authorize(create)
	if d == auth.DecisionAllow {
		return nil
	}
	namespace := a.Namespace
	if !res.Namespaced {
		namespace = ""
	}
	if _, err := s.reg.Get(ctx, res, namespace, a.Name, ""); !apierrors.IsNotFound(err) {
		// Present (an update), or unknown: the handler decides.
		return nil
	}
	return forbidden(create, reason)
}

// htmlSanitizer keeps messages from looking like HTML, as kube-apiserver's
// responsewriters do.
var htmlSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// forbidden is kube-apiserver's 403 for a refused request
// (apiserver/pkg/endpoints/handlers/responsewriters/errors.go).
func forbidden(a auth.Attributes, reason string) error {
	msg := htmlSanitizer.Replace(forbiddenMessage(a))
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

func forbiddenMessage(a auth.Attributes) string {
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", a.User.Name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", a.User.Name, a.Verb, resource, a.APIGroup)
}
