package httpserver

import (
	"net/http"
	"slices"
	"strings"
)

// requestInfo is what a resource path says, parsed as kube-apiserver's
// RequestInfoFactory parses it.
type requestInfo struct {
	group, version string
	// watchPath is set for the deprecated /watch/ paths.
	watchPath   bool
	namespace   string
	resource    string
	name        string
	subresource string
	// verb is get, list, watch, create, update, patch, delete or
	// deletecollection.
	verb string
}

// namespaceSubresources are the subresources of a namespace itself, as
// opposed to resources inside a namespace.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseResourcePath parses /api/v1/... and /apis/{group}/{version}/...
// below the group version. ok is false when the path is not a resource
// path (discovery documents, unknown prefixes).
func parseResourcePath(req *http.Request) (info requestInfo, ok bool) {
	parts := splitPath(req.URL.Path)
	if slices.Contains(parts, "") {
		// No route has an empty segment (a//b).
		return info, false
	}
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.version = parts[1]
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.group, info.version = parts[1], parts[2]
		parts = parts[3:]
	default:
		return info, false
	}
	if parts[0] == "watch" {
		info.watchPath = true
		parts = parts[1:]
	}
	// scoped is set when the path goes on below namespaces/{ns}/.
	scoped := false
	if len(parts) > 0 && parts[0] == "namespaces" && len(parts) > 1 {
		info.namespace = parts[1]
		// namespaces/{ns}/{resource}... unless it is the namespace's own
		// subresource (namespaces/{name}/status).
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
			scoped = true
		}
	}
	if len(parts) == 0 || len(parts) > 3 {
		return info, len(parts) == 0
	}
	info.resource = parts[0]
	if len(parts) >= 2 {
		info.name = parts[1]
	}
	if len(parts) == 3 {
		info.subresource = parts[2]
	}
	if info.resource == "namespaces" && !scoped {
		// A namespace path names the namespace itself. Below another
		// namespace (namespaces/{ns}/namespaces/...) it keeps that
		// namespace, so the route check refuses it as kube-apiserver's
		// router does: authorization saw namespace {ns}, not the one
		// named after it.
		info.name, info.namespace = info.namespace, ""
		if len(parts) >= 2 {
			info.name = parts[1]
		}
	}

	switch req.Method {
	case http.MethodGet, http.MethodHead:
		// As kube-apiserver: a named GET is a get whatever ?watch says.
		switch {
		case info.watchPath:
			info.verb = "watch"
		case info.name != "":
			info.verb = "get"
		case isWatch(req):
			info.verb = "watch"
		default:
			info.verb = "list"
		}
	case http.MethodPost:
		info.verb = "create"
	case http.MethodPut:
		info.verb = "update"
	case http.MethodPatch:
		info.verb = "patch"
	case http.MethodDelete:
		if info.name != "" {
			info.verb = "delete"
		} else {
			info.verb = "deletecollection"
		}
	}
	return info, true
}

// isWatch reads the watch parameter as apimachinery's parameter codec
// does, and so as authorization and kube-apiserver's handlers do: present
// with any value but "0" or "false" (even empty) means true.
func isWatch(req *http.Request) bool {
	v := req.URL.Query()["watch"]
	return len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
