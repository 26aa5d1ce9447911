package openapi

import (
	"maps"
	"strings"

	"k8s.io/kube-openapi/pkg/spec3"
)

// filterGroupVersionKinds narrows, in the v3 document of a group version,
// the x-kubernetes-group-version-kind list of the kinds
// metav1.AddToGroupVersion registers in every group (WatchEvent,
// DeleteOptions) to that group version and core v1, as kube-apiserver's
// InstallV3 does. Documents of other roots are left alone.
// https://github.com/kubernetes/apiserver/blob/v0.37.2/pkg/server/routes/openapi.go
func filterGroupVersionKinds(doc *spec3.OpenAPI, root string) {
	parts := strings.Split(strings.TrimPrefix(root, "/"), "/")
	var group, version string
	switch {
	case len(parts) == 2 && parts[0] == "api":
		version = parts[1]
	case len(parts) == 3 && parts[0] == "apis":
		group, version = parts[1], parts[2]
	default:
		return
	}
	if doc.Components == nil {
		return
	}
	for _, schema := range doc.Components.Schemas {
		if schema == nil {
			continue
		}
		gvks, ok := schema.Extensions[gvkExtension].([]any)
		if !ok || len(gvks) <= 1 || !crossRegistered(gvks[0]) {
			continue
		}
		var kept []any
		for _, item := range gvks {
			m, _ := item.(map[string]any)
			g, v := m["group"], m["version"]
			if (g == group && v == version) || (g == "" && v == "v1") {
				kept = append(kept, item)
			}
		}
		// The extensions map may be shared with the generated definition.
		ext := maps.Clone(schema.Extensions)
		if len(kept) > 0 {
			ext[gvkExtension] = kept
		} else {
			delete(ext, gvkExtension)
		}
		schema.Extensions = ext
	}
}

// crossRegistered reports whether a GVK list entry names a kind that
// metav1.AddToGroupVersion registers into every group version.
func crossRegistered(item any) bool {
	m, _ := item.(map[string]any)
	switch m["kind"] {
	case "WatchEvent", "DeleteOptions":
		return true
	}
	return false
}
