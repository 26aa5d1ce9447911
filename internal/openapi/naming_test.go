package openapi

import (
	"slices"
	"testing"
)

func TestOperationIDAndTags(t *testing.T) {
	for _, c := range []struct {
		operation, path string
		wantID          string
		wantTags        []string
	}{
		{"readNamespacedLease", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "readCoordinationV1NamespacedLease", []string{"coordination_v1"}},
		{"deletecollectionNamespacedLease", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "deleteCoordinationV1CollectionNamespacedLease", []string{"coordination_v1"}},
		{"patchNamespaceStatus", "/api/v1/namespaces/{name}/status", "patchCoreV1NamespaceStatus", []string{"core_v1"}},
		{"watchFlowSchemaList", "/apis/flowcontrol.apiserver.k8s.io/v1/watch/flowschemas", "watchFlowcontrolApiserverV1FlowSchemaList", []string{"flowcontrolApiserver_v1"}},
		{"getAPIVersions", "/api/", "getCoreAPIVersions", []string{"core"}},
		{"getAPIVersions", "/apis/", "getAPIVersions", []string{"apis"}},
		{"getAPIGroup", "/apis/coordination.k8s.io/", "getCoordinationAPIGroup", []string{"coordination"}},
		{"getCodeVersion", "/version/", "getCodeVersion", []string{"version"}},
	} {
		id, tags, err := operationIDAndTags(&route{operation: c.operation, path: c.path})
		if err != nil || id != c.wantID || !slices.Equal(tags, c.wantTags) {
			t.Errorf("%s at %s: %q %q %v, want %q %q", c.operation, c.path, id, tags, err, c.wantID, c.wantTags)
		}
	}
	if _, _, err := operationIDAndTags(&route{operation: "frobLease", path: "/api/v1/leases"}); err == nil {
		t.Error("no error for an operation without a verb")
	}
}

func TestArticleFor(t *testing.T) {
	for kind, want := range map[string]string{"Lease": " a ", "Endpoints": " ", "Namespace": " a ", "IngressClass": " an ", "Event": " an "} {
		if got := articleFor(kind); got != want {
			t.Errorf("articleFor(%q) = %q, want %q", kind, got, want)
		}
	}
}
