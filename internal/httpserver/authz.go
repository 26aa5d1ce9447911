package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/auth"
)

// Authorizer decides whether a request is allowed. Decisions other than
// auth.DecisionAllow refuse it; reason tells why.
type Authorizer interface {
	Authorize(a auth.Attributes) (decision auth.Decision, reason string)
	// RulesFor lists what u may do in namespace (SelfSubjectRulesReview);
	// an error comes with the rules that could be resolved.
	RulesFor(u auth.User, namespace string) (auth.Rules, error)
}

// longRunning reports whether a request may outlive the request timeout
// and is exempt from it and from the in-flight limits: watches and
// profiles, as kube-apiserver's BasicLongRunningRequestCheck decides, and
// snapshots, which take as long as the store is large.
func longRunning(a auth.Attributes) bool {
	return a.Verb == "watch" || !a.ResourceRequest && (strings.HasPrefix(a.Path, "/debug/pprof/") || a.Path == SnapshotPath)
}

// mutating reports whether a request counts against the mutating
// in-flight limit: every verb but get, list and watch.
func mutating(a auth.Attributes) bool { return !a.IsReadOnly() }

// authorize refuses a request the authorizer does not allow, with
// kube-apiserver's 403. A PUT that would create its object (and a
// server-side apply that would) also needs the create verb, as in
// kube-apiserver's update and patch handlers.
func (s *Server) authorize(ctx context.Context, req *http.Request, call *request) error {
	if s.authz == nil {
		return nil
	}
	d, reason := s.authz.Authorize(call.attrs)
	audit.RecordFrom(ctx).Authorized(d == auth.DecisionAllow, reason)
	if d != auth.DecisionAllow {
		return forbidden(call.attrs, reason)
	}
	return s.authorizeCreateOnUpdate(ctx, req, call)
}

// authorizeCreateOnUpdate checks create for a PUT (or apply PATCH) to a
// missing object, before the handler runs. kube-apiserver checks inside
// the storage update, when it finds the object missing; here the object
// is looked up first, so a delete racing with the request can let the PUT
// create without the check. With ABAC that cannot matter: a policy that
// allows update allows create.
func (s *Server) authorizeCreateOnUpdate(ctx context.Context, req *http.Request, call *request) error {
	a := call.attrs
	if !a.ResourceRequest || a.Subresource != "" || a.Name == "" {
		return nil
	}
	switch {
	case a.Verb == "update":
	case a.Verb == "patch" && strings.HasPrefix(strings.TrimSpace(req.Header.Get("Content-Type")), string(types.ApplyYAMLPatchType)):
	default:
		return nil
	}
	res, ok := s.reg.Resource(call.gvr())
	if !ok || a.Verb == "update" && !res.Kind.Updates.AllowCreateOnUpdate {
		return nil
	}
	create := a
	create.Verb = "create"
	d, reason := s.authz.Authorize(create)
	if d == auth.DecisionAllow {
		return nil
	}
	if _, err := s.reg.Get(ctx, res, call.namespace(), a.Name, ""); !apierrors.IsNotFound(err) {
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
