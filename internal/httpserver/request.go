package httpserver

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/auth"
)

// request is what a request's method, path and query say, read once.
// attrs is what authorization and the in-flight limits see, read as
// kube-apiserver's RequestInfoFactory reads a request
// (apiserver/pkg/endpoints/request/requestinfo.go); the other fields are
// what the router needs on top. Routing serves exactly what attrs names:
// the few places where kube-apiserver's router and RequestInfoFactory
// differ are refusals of the router (routeError), and the one quirk of
// RequestInfoFactory (a namespace's own path names it as its namespace)
// is undone by namespace().
type request struct {
	// received is when the request arrived (the audit log's
	// requestReceivedTimestamp).
	received time.Time
	// auditID is the request's Audit-Id (the client's, or one made for
	// it; every answer carries it) as the values of the answer's header:
	// in the request's allocation rather than one of its own.
	auditID [1]string
	// ctx is the request's context with its deadline (withDeadline); nil
	// for a long-running request.
	ctx context.Context
	// answer records the status of the answer: every request's writer
	// is wrapped in it (ServeHTTP), in the request's allocation.
	answer statusWriter
	attrs  auth.Attributes
	method string
	query  url.Values
	// watchPath is set for the deprecated /watch/ paths.
	watchPath bool
	// scoped is set when the path goes on below namespaces/{ns}/.
	scoped bool
	// routable is false for a path no route can have: an empty segment
	// (a//b), or more than a resource, a name and a subresource.
	routable bool
	// leaseHistory is set for LeaseHistoryPath, authorized as a list of
	// leases (leaseHistoryRequest).
	leaseHistory bool
}

// lowerMethod is strings.ToLower(method), without an allocation for the
// methods the API serves.
func lowerMethod(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "put"
	case http.MethodPost:
		return "post"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// namespaceSubresources are the subresources of a namespace itself, as
// opposed to resources inside a namespace.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseRequest reads a request. Resource requests are /api/{version}/...
// and /apis/{group}/{version}/... with at least a resource, with a
// Kubernetes verb; everything else (discovery documents, /openapi,
// /debug/pprof) is a non-resource request whose verb is the lower-case
// HTTP method. A list or watch whose field selector fixes metadata.name is
// authorized with that name, as in kube-apiserver.
func parseRequest(req *http.Request) *request {
	call := &request{
		received: time.Now(),
		method:   req.Method,
		attrs:    auth.Attributes{Path: req.URL.Path, Verb: lowerMethod(req.Method)},
	}
	if req.URL.RawQuery != "" {
		call.query = req.URL.Query() // (a map even for none)
	}
	if req.URL.Path == LeaseHistoryPath {
		leaseHistoryRequest(call)
		return call
	}
	a := &call.attrs
	var segments [maxSegments]string
	parts := appendSegments(segments[:0], req.URL.Path)
	call.routable = !slices.Contains(parts, "")
	if len(parts) < 3 || parts[0] != "api" && parts[0] != "apis" {
		return call
	}
	prefix := parts[0]
	parts = parts[1:]
	if prefix == "apis" {
		if len(parts) < 3 {
			return call
		}
		a.APIGroup = parts[0]
		parts = parts[1:]
	}
	a.ResourceRequest = true
	a.APIVersion = parts[0]
	parts = parts[1:]

	if parts[0] == "watch" || parts[0] == "proxy" {
		a.Verb = parts[0]
		call.watchPath = parts[0] == "watch"
		parts = parts[1:]
		if len(parts) == 0 {
			// kube-apiserver fails such a request (500); leasehold
			// authorizes it without a resource, and the router answers
			// 404.
			return call
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
		// namespaces/{ns}/{resource}... unless it is the namespace's own
		// subresource (namespaces/{name}/status).
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
			call.scoped = true
		}
	}
	if len(parts) > 3 {
		call.routable = false
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
		a.Verb = "list"
		if isWatch(call.query) {
			a.Verb = "watch"
		}
		if v := call.query.Get("fieldSelector"); v != "" {
			// As kube-apiserver: a selector that does not parse names
			// nothing here, and the handler answers 400.
			if sel, err := fields.ParseSelector(v); err == nil {
				if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(content.IsPathSegmentName(name)) == 0 {
					a.Name = name
				}
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	return call
}

// isWatch reads the watch parameter as apimachinery's parameter codec
// does, and so as kube-apiserver's authorization and handlers do: present
// with any value but "0" or "false" (even empty) means true.
func isWatch(query url.Values) bool {
	v := query["watch"]
	return len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// splitPath is p's segments, between the slashes that begin and end it
// (none for "/"); an empty one between two slashes in a row.
func splitPath(p string) []string { return appendSegments(nil, p) }

// maxSegments is more than an API path has: a request's are split into
// an array on its stack (a longer path's spill to the heap).
const maxSegments = 10

// appendSegments appends splitPath(p) to parts.
func appendSegments(parts []string, p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return parts
	}
	for s := range strings.SplitSeq(p, "/") {
		parts = append(parts, s)
	}
	return parts
}

// gvr is the group, version and resource the request names.
func (call *request) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: call.attrs.APIGroup, Version: call.attrs.APIVersion, Resource: call.attrs.Resource}
}

// namespace is the namespace the route serves: the authorized namespace,
// except for a namespace's own path, which authorization sees as in the
// namespace it names.
func (call *request) namespace() string {
	if call.attrs.Resource == "namespaces" && !call.scoped {
		return ""
	}
	return call.attrs.Namespace
}

// name is the object the route serves: a list or a watch of a collection
// names none, even when authorized with a field-selected name.
func (call *request) name() string {
	if call.attrs.Verb == "list" || call.attrs.Verb == "watch" && !call.watchPath {
		return ""
	}
	return call.attrs.Name
}
