package openapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/leasehold/leasehold/internal/openapi"
	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

const (
	v2ProtoType = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	v3ProtoType = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

func served() []*resources.Kind {
	return builtin.Kinds(builtin.Options{})
}

func newService(t testing.TB) *openapi.Service {
	t.Helper()
	s, err := openapi.New(served())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Build(); err != nil {
		t.Fatalf("Build: %v", err)
	}
	return s
}

// get serves one request and returns the response with its body read.
func get(t *testing.T, h http.Handler, path, accept string) (*http.Response, []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	resp := w.Result()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// operation is an operation as kube-apiserver's documents show it.
type operation struct {
	Method, Path, ID, Action string
}

// wantOperations are the operations kube-apiserver documents for Leases,
// Endpoints, EndpointSlices, Events (core and events.k8s.io), Namespaces
// and the discovery and version endpoints.
var wantOperations = []operation{
	{"GET", "/api/", "getCoreAPIVersions", ""},
	{"GET", "/apis/", "getAPIVersions", ""},
	{"GET", "/version/", "getCodeVersion", ""},
	{"GET", "/apis/coordination.k8s.io/", "getCoordinationAPIGroup", ""},

	{"GET", "/apis/coordination.k8s.io/v1/", "getCoordinationV1APIResources", ""},
	{"GET", "/apis/coordination.k8s.io/v1/leases", "listCoordinationV1LeaseForAllNamespaces", "list"},
	{"GET", "/apis/coordination.k8s.io/v1/watch/leases", "watchCoordinationV1LeaseListForAllNamespaces", "watchlist"},
	{"GET", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "listCoordinationV1NamespacedLease", "list"},
	{"POST", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "createCoordinationV1NamespacedLease", "post"},
	{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "deleteCoordinationV1CollectionNamespacedLease", "deletecollection"},
	{"GET", "/apis/coordination.k8s.io/v1/watch/namespaces/{namespace}/leases", "watchCoordinationV1NamespacedLeaseList", "watchlist"},
	{"GET", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "readCoordinationV1NamespacedLease", "get"},
	{"PUT", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "replaceCoordinationV1NamespacedLease", "put"},
	{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "patchCoordinationV1NamespacedLease", "patch"},
	{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "deleteCoordinationV1NamespacedLease", "delete"},
	{"GET", "/apis/coordination.k8s.io/v1/watch/namespaces/{namespace}/leases/{name}", "watchCoordinationV1NamespacedLease", "watch"},

	{"GET", "/api/v1/", "getCoreV1APIResources", ""},
	{"GET", "/api/v1/endpoints", "listCoreV1EndpointsForAllNamespaces", "list"},
	{"GET", "/api/v1/watch/endpoints", "watchCoreV1EndpointsListForAllNamespaces", "watchlist"},
	{"GET", "/api/v1/namespaces/{namespace}/endpoints", "listCoreV1NamespacedEndpoints", "list"},
	{"POST", "/api/v1/namespaces/{namespace}/endpoints", "createCoreV1NamespacedEndpoints", "post"},
	{"DELETE", "/api/v1/namespaces/{namespace}/endpoints", "deleteCoreV1CollectionNamespacedEndpoints", "deletecollection"},
	{"GET", "/api/v1/watch/namespaces/{namespace}/endpoints", "watchCoreV1NamespacedEndpointsList", "watchlist"},
	{"GET", "/api/v1/namespaces/{namespace}/endpoints/{name}", "readCoreV1NamespacedEndpoints", "get"},
	{"PUT", "/api/v1/namespaces/{namespace}/endpoints/{name}", "replaceCoreV1NamespacedEndpoints", "put"},
	{"PATCH", "/api/v1/namespaces/{namespace}/endpoints/{name}", "patchCoreV1NamespacedEndpoints", "patch"},
	{"DELETE", "/api/v1/namespaces/{namespace}/endpoints/{name}", "deleteCoreV1NamespacedEndpoints", "delete"},
	{"GET", "/api/v1/watch/namespaces/{namespace}/endpoints/{name}", "watchCoreV1NamespacedEndpoints", "watch"},

	{"GET", "/apis/discovery.k8s.io/", "getDiscoveryAPIGroup", ""},
	{"GET", "/apis/discovery.k8s.io/v1/", "getDiscoveryV1APIResources", ""},
	{"GET", "/apis/discovery.k8s.io/v1/endpointslices", "listDiscoveryV1EndpointSliceForAllNamespaces", "list"},
	{"GET", "/apis/discovery.k8s.io/v1/watch/endpointslices", "watchDiscoveryV1EndpointSliceListForAllNamespaces", "watchlist"},
	{"GET", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "listDiscoveryV1NamespacedEndpointSlice", "list"},
	{"POST", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "createDiscoveryV1NamespacedEndpointSlice", "post"},
	{"DELETE", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "deleteDiscoveryV1CollectionNamespacedEndpointSlice", "deletecollection"},
	{"GET", "/apis/discovery.k8s.io/v1/watch/namespaces/{namespace}/endpointslices", "watchDiscoveryV1NamespacedEndpointSliceList", "watchlist"},
	{"GET", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}", "readDiscoveryV1NamespacedEndpointSlice", "get"},
	{"PUT", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}", "replaceDiscoveryV1NamespacedEndpointSlice", "put"},
	{"PATCH", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}", "patchDiscoveryV1NamespacedEndpointSlice", "patch"},
	{"DELETE", "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}", "deleteDiscoveryV1NamespacedEndpointSlice", "delete"},
	{"GET", "/apis/discovery.k8s.io/v1/watch/namespaces/{namespace}/endpointslices/{name}", "watchDiscoveryV1NamespacedEndpointSlice", "watch"},

	{"GET", "/api/v1/events", "listCoreV1EventForAllNamespaces", "list"},
	{"GET", "/api/v1/watch/events", "watchCoreV1EventListForAllNamespaces", "watchlist"},
	{"GET", "/api/v1/namespaces/{namespace}/events", "listCoreV1NamespacedEvent", "list"},
	{"POST", "/api/v1/namespaces/{namespace}/events", "createCoreV1NamespacedEvent", "post"},
	{"DELETE", "/api/v1/namespaces/{namespace}/events", "deleteCoreV1CollectionNamespacedEvent", "deletecollection"},
	{"GET", "/api/v1/watch/namespaces/{namespace}/events", "watchCoreV1NamespacedEventList", "watchlist"},
	{"GET", "/api/v1/namespaces/{namespace}/events/{name}", "readCoreV1NamespacedEvent", "get"},
	{"PUT", "/api/v1/namespaces/{namespace}/events/{name}", "replaceCoreV1NamespacedEvent", "put"},
	{"PATCH", "/api/v1/namespaces/{namespace}/events/{name}", "patchCoreV1NamespacedEvent", "patch"},
	{"DELETE", "/api/v1/namespaces/{namespace}/events/{name}", "deleteCoreV1NamespacedEvent", "delete"},
	{"GET", "/api/v1/watch/namespaces/{namespace}/events/{name}", "watchCoreV1NamespacedEvent", "watch"},

	{"GET", "/apis/events.k8s.io/", "getEventsAPIGroup", ""},
	{"GET", "/apis/events.k8s.io/v1/", "getEventsV1APIResources", ""},
	{"GET", "/apis/events.k8s.io/v1/events", "listEventsV1EventForAllNamespaces", "list"},
	{"GET", "/apis/events.k8s.io/v1/watch/events", "watchEventsV1EventListForAllNamespaces", "watchlist"},
	{"GET", "/apis/events.k8s.io/v1/namespaces/{namespace}/events", "listEventsV1NamespacedEvent", "list"},
	{"POST", "/apis/events.k8s.io/v1/namespaces/{namespace}/events", "createEventsV1NamespacedEvent", "post"},
	{"DELETE", "/apis/events.k8s.io/v1/namespaces/{namespace}/events", "deleteEventsV1CollectionNamespacedEvent", "deletecollection"},
	{"GET", "/apis/events.k8s.io/v1/watch/namespaces/{namespace}/events", "watchEventsV1NamespacedEventList", "watchlist"},
	{"GET", "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", "readEventsV1NamespacedEvent", "get"},
	{"PUT", "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", "replaceEventsV1NamespacedEvent", "put"},
	{"PATCH", "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", "patchEventsV1NamespacedEvent", "patch"},
	{"DELETE", "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}", "deleteEventsV1NamespacedEvent", "delete"},
	{"GET", "/apis/events.k8s.io/v1/watch/namespaces/{namespace}/events/{name}", "watchEventsV1NamespacedEvent", "watch"},

	// Namespaces have no deletecollection.
	{"GET", "/api/v1/namespaces", "listCoreV1Namespace", "list"},
	{"POST", "/api/v1/namespaces", "createCoreV1Namespace", "post"},
	{"GET", "/api/v1/watch/namespaces", "watchCoreV1NamespaceList", "watchlist"},
	{"GET", "/api/v1/namespaces/{name}", "readCoreV1Namespace", "get"},
	{"PUT", "/api/v1/namespaces/{name}", "replaceCoreV1Namespace", "put"},
	{"PATCH", "/api/v1/namespaces/{name}", "patchCoreV1Namespace", "patch"},
	{"DELETE", "/api/v1/namespaces/{name}", "deleteCoreV1Namespace", "delete"},
	{"GET", "/api/v1/watch/namespaces/{name}", "watchCoreV1Namespace", "watch"},
	{"GET", "/api/v1/namespaces/{name}/status", "readCoreV1NamespaceStatus", "get"},
	{"PUT", "/api/v1/namespaces/{name}/status", "replaceCoreV1NamespaceStatus", "put"},
	{"PATCH", "/api/v1/namespaces/{name}/status", "patchCoreV1NamespaceStatus", "patch"},
	{"PUT", "/api/v1/namespaces/{name}/finalize", "replaceCoreV1NamespaceFinalize", "put"},

	// rbac.authorization.k8s.io, from kube-apiserver v1.36's api/openapi-spec/swagger.json.
	{"GET", "/apis/rbac.authorization.k8s.io/", "getRbacAuthorizationAPIGroup", ""},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/", "getRbacAuthorizationV1APIResources", ""},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "listRbacAuthorizationV1ClusterRoleBinding", "list"},
	{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "createRbacAuthorizationV1ClusterRoleBinding", "post"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "deleteRbacAuthorizationV1CollectionClusterRoleBinding", "deletecollection"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", "readRbacAuthorizationV1ClusterRoleBinding", "get"},
	{"PUT", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", "replaceRbacAuthorizationV1ClusterRoleBinding", "put"},
	{"PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", "patchRbacAuthorizationV1ClusterRoleBinding", "patch"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", "deleteRbacAuthorizationV1ClusterRoleBinding", "delete"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "listRbacAuthorizationV1ClusterRole", "list"},
	{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "createRbacAuthorizationV1ClusterRole", "post"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "deleteRbacAuthorizationV1CollectionClusterRole", "deletecollection"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", "readRbacAuthorizationV1ClusterRole", "get"},
	{"PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", "replaceRbacAuthorizationV1ClusterRole", "put"},
	{"PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", "patchRbacAuthorizationV1ClusterRole", "patch"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", "deleteRbacAuthorizationV1ClusterRole", "delete"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", "listRbacAuthorizationV1NamespacedRoleBinding", "list"},
	{"POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", "createRbacAuthorizationV1NamespacedRoleBinding", "post"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", "deleteRbacAuthorizationV1CollectionNamespacedRoleBinding", "deletecollection"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}", "readRbacAuthorizationV1NamespacedRoleBinding", "get"},
	{"PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}", "replaceRbacAuthorizationV1NamespacedRoleBinding", "put"},
	{"PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}", "patchRbacAuthorizationV1NamespacedRoleBinding", "patch"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}", "deleteRbacAuthorizationV1NamespacedRoleBinding", "delete"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", "listRbacAuthorizationV1NamespacedRole", "list"},
	{"POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", "createRbacAuthorizationV1NamespacedRole", "post"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", "deleteRbacAuthorizationV1CollectionNamespacedRole", "deletecollection"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}", "readRbacAuthorizationV1NamespacedRole", "get"},
	{"PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}", "replaceRbacAuthorizationV1NamespacedRole", "put"},
	{"PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}", "patchRbacAuthorizationV1NamespacedRole", "patch"},
	{"DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}", "deleteRbacAuthorizationV1NamespacedRole", "delete"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/rolebindings", "listRbacAuthorizationV1RoleBindingForAllNamespaces", "list"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/roles", "listRbacAuthorizationV1RoleForAllNamespaces", "list"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/clusterrolebindings", "watchRbacAuthorizationV1ClusterRoleBindingList", "watchlist"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/clusterrolebindings/{name}", "watchRbacAuthorizationV1ClusterRoleBinding", "watch"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/clusterroles", "watchRbacAuthorizationV1ClusterRoleList", "watchlist"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/clusterroles/{name}", "watchRbacAuthorizationV1ClusterRole", "watch"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/namespaces/{namespace}/rolebindings", "watchRbacAuthorizationV1NamespacedRoleBindingList", "watchlist"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/namespaces/{namespace}/rolebindings/{name}", "watchRbacAuthorizationV1NamespacedRoleBinding", "watch"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/namespaces/{namespace}/roles", "watchRbacAuthorizationV1NamespacedRoleList", "watchlist"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/namespaces/{namespace}/roles/{name}", "watchRbacAuthorizationV1NamespacedRole", "watch"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/rolebindings", "watchRbacAuthorizationV1RoleBindingListForAllNamespaces", "watchlist"},
	{"GET", "/apis/rbac.authorization.k8s.io/v1/watch/roles", "watchRbacAuthorizationV1RoleListForAllNamespaces", "watchlist"},
}

func sortOperations(ops []operation) {
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.ID, b.ID) })
}

// v2Operations lists a v2 document's operations.
func v2Operations(doc *spec.Swagger) map[operation]*spec.Operation {
	out := map[operation]*spec.Operation{}
	for path, item := range doc.Paths.Paths {
		for method, op := range map[string]*spec.Operation{
			"GET": item.Get, "PUT": item.Put, "POST": item.Post, "PATCH": item.Patch, "DELETE": item.Delete,
		} {
			if op == nil {
				continue
			}
			action, _ := op.Extensions.GetString("x-kubernetes-action")
			out[operation{method, path, op.ID, action}] = op
		}
	}
	return out
}

// v3Operations lists a v3 document's operations.
func v3Operations(doc *spec3.OpenAPI) map[operation]*spec3.Operation {
	out := map[operation]*spec3.Operation{}
	for path, item := range doc.Paths.Paths {
		for method, op := range map[string]*spec3.Operation{
			"GET": item.Get, "PUT": item.Put, "POST": item.Post, "PATCH": item.Patch, "DELETE": item.Delete,
		} {
			if op == nil {
				continue
			}
			action, _ := op.Extensions.GetString("x-kubernetes-action")
			out[operation{method, path, op.OperationId, action}] = op
		}
	}
	return out
}

func getV2(t *testing.T, s http.Handler) *spec.Swagger {
	t.Helper()
	resp, body := get(t, s, "/openapi/v2", "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v2: %s", resp.Status)
	}
	var doc spec.Swagger
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("decoding /openapi/v2: %v", err)
	}
	return &doc
}

// v2Params returns an operation's parameters by name, path-level ones
// and shared ones resolved.
func v2Params(t *testing.T, doc *spec.Swagger, path string, op *spec.Operation) map[string]spec.Parameter {
	t.Helper()
	out := map[string]spec.Parameter{}
	for _, p := range slices.Concat(doc.Paths.Paths[path].Parameters, op.Parameters) {
		if ref := p.Ref.String(); ref != "" {
			shared, ok := doc.Parameters[strings.TrimPrefix(ref, "#/parameters/")]
			if !ok {
				t.Fatalf("%s: dangling parameter %s", op.ID, ref)
			}
			p = shared
		}
		out[p.Name] = p
	}
	return out
}

func TestV2Operations(t *testing.T) {
	doc := getV2(t, newService(t))
	if doc.Swagger != "2.0" || doc.Info.Title != "Kubernetes" {
		t.Errorf("swagger %q, title %q; want 2.0, Kubernetes", doc.Swagger, doc.Info.Title)
	}
	ops := v2Operations(doc)
	got := slices.Collect(func(yield func(operation) bool) {
		for op := range ops {
			if !yield(op) {
				return
			}
		}
	})
	want := slices.Clone(wantOperations)
	sortOperations(got)
	sortOperations(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("operations (-want +got):\n%s", diff)
	}

	list := []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "pretty", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch"}
	paramsByAction := map[string][]string{
		"get":              {"pretty"},
		"list":             list,
		"watch":            list,
		"watchlist":        list,
		"post":             {"body", "dryRun", "fieldManager", "fieldValidation", "pretty"},
		"put":              {"body", "dryRun", "fieldManager", "fieldValidation", "pretty"},
		"patch":            {"body", "dryRun", "fieldManager", "fieldValidation", "force", "pretty"},
		"delete":           {"body", "dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "pretty", "propagationPolicy"},
		"deletecollection": {"body", "continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "labelSelector", "limit", "orphanDependents", "pretty", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds"},
	}
	for key, op := range ops {
		t.Run(key.ID, func(t *testing.T) {
			params := v2Params(t, doc, key.Path, op)
			var names []string
			for name, p := range params {
				if p.In != "path" {
					names = append(names, name)
				}
			}
			slices.Sort(names)
			if want := paramsByAction[key.Action]; key.Action != "" && !slices.Equal(names, want) {
				t.Errorf("query and body parameters %q, want %q", names, want)
			}
			for _, name := range []string{"namespace", "name"} {
				p, ok := params[name]
				if want := strings.Contains(key.Path, "{"+name+"}"); ok != want || ok && (p.In != "path" || !p.Required) {
					t.Errorf("path parameter %s: %+v, want present=%v and required", name, p, want)
				}
			}
			if len(op.Schemes) != 1 || op.Schemes[0] != "https" {
				t.Errorf("schemes %q, want [https]", op.Schemes)
			}
			if _, ok := op.Responses.StatusCodeResponses[http.StatusUnauthorized]; !ok {
				t.Error("no 401 response")
			}
			if key.Action == "" {
				return
			}
			gvk, ok := op.Extensions[gvkExt].(map[string]any)
			if !ok || gvk["kind"] == "" {
				t.Errorf("x-kubernetes-group-version-kind = %v", op.Extensions[gvkExt])
			}
		})
	}
}

const gvkExt = "x-kubernetes-group-version-kind"

// kubectl (until 1.27) looked for fieldValidation among the parameters of
// the operation itself, so it is never a shared parameter, nor a
// path-level one except on the single-operation finalize path.
func TestFieldValidationOnWrites(t *testing.T) {
	doc := getV2(t, newService(t))
	for key, op := range v2Operations(doc) {
		switch key.Action {
		case "post", "put", "patch":
		default:
			continue
		}
		params := slices.Concat(doc.Paths.Paths[key.Path].Parameters, op.Parameters)
		if !slices.ContainsFunc(params, func(p spec.Parameter) bool {
			return p.Name == "fieldValidation" && p.In == "query" && p.Type == "string" && p.Ref.String() == ""
		}) {
			t.Errorf("%s: no inline fieldValidation query parameter", key.ID)
		}
	}
	patch := doc.Paths.Paths["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"].Patch
	want := []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
	if diff := cmp.Diff(want, patch.Consumes); diff != "" {
		t.Errorf("patch consumes (-want +got):\n%s", diff)
	}
}

func TestV2Definitions(t *testing.T) {
	doc := getV2(t, newService(t))
	for name, want := range map[string][]any{
		"io.k8s.api.coordination.v1.Lease":                        {map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}},
		"io.k8s.api.coordination.v1.LeaseList":                    {map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "LeaseList"}},
		"io.k8s.api.core.v1.Endpoints":                            {map[string]any{"group": "", "version": "v1", "kind": "Endpoints"}},
		"io.k8s.api.discovery.v1.EndpointSlice":                   {map[string]any{"group": "discovery.k8s.io", "version": "v1", "kind": "EndpointSlice"}},
		"io.k8s.api.discovery.v1.EndpointSliceList":               {map[string]any{"group": "discovery.k8s.io", "version": "v1", "kind": "EndpointSliceList"}},
		"io.k8s.api.discovery.v1.Endpoint":                        nil,
		"io.k8s.api.core.v1.Namespace":                            {map[string]any{"group": "", "version": "v1", "kind": "Namespace"}},
		"io.k8s.api.core.v1.Event":                                {map[string]any{"group": "", "version": "v1", "kind": "Event"}},
		"io.k8s.api.events.v1.Event":                              {map[string]any{"group": "events.k8s.io", "version": "v1", "kind": "Event"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.Status":             {map[string]any{"group": "", "version": "v1", "kind": "Status"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList":    {map[string]any{"group": "", "version": "v1", "kind": "APIResourceList"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent":         {map[string]any{"group": "", "version": "v1", "kind": "WatchEvent"}, map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "WatchEvent"}, map[string]any{"group": "discovery.k8s.io", "version": "v1", "kind": "WatchEvent"}, map[string]any{"group": "events.k8s.io", "version": "v1", "kind": "WatchEvent"}, map[string]any{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "WatchEvent"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions":      {map[string]any{"group": "", "version": "v1", "kind": "DeleteOptions"}, map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "DeleteOptions"}, map[string]any{"group": "discovery.k8s.io", "version": "v1", "kind": "DeleteOptions"}, map[string]any{"group": "events.k8s.io", "version": "v1", "kind": "DeleteOptions"}, map[string]any{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "DeleteOptions"}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":         nil,
		"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":          nil,
		"io.k8s.apimachinery.pkg.apis.meta.v1.Patch":              nil,
		"io.k8s.apimachinery.pkg.version.Info":                    nil,
		"io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry": nil,
	} {
		def, ok := doc.Definitions[name]
		if !ok {
			t.Errorf("no definition %s", name)
			continue
		}
		got, ok := def.Extensions[gvkExt]
		if want == nil {
			if ok {
				t.Errorf("%s has %s %v", name, gvkExt, got)
			}
			continue
		}
		if diff := cmp.Diff(any(want), got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", name, gvkExt, diff)
		}
	}
	if _, ok := doc.Definitions["io.k8s.api.core.v1.Pod"]; ok {
		t.Error("unserved kind Pod is documented")
	}

	// Extensions openapi-gen derives from the k8s.io/api comment tags.
	props := func(def string) map[string]spec.Schema { return doc.Definitions[def].Properties }
	for _, c := range []struct {
		def, prop, ext string
		want           any
	}{
		{"io.k8s.api.core.v1.Endpoints", "subsets", "x-kubernetes-list-type", "atomic"},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "x-kubernetes-patch-strategy", "merge"},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "x-kubernetes-patch-merge-key", "uid"},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "x-kubernetes-list-map-keys", []any{"uid"}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", "x-kubernetes-list-type", "set"},
		{"io.k8s.api.core.v1.NamespaceStatus", "conditions", "x-kubernetes-patch-merge-key", "type"},
		{"io.k8s.api.core.v1.NamespaceStatus", "conditions", "x-kubernetes-list-type", "map"},
	} {
		if diff := cmp.Diff(c.want, props(c.def)[c.prop].Extensions[c.ext]); diff != "" {
			t.Errorf("%s.%s %s (-want +got):\n%s", c.def, c.prop, c.ext, diff)
		}
	}
	// Defaults are pruned from v2, as kube-apiserver does.
	if d := props("io.k8s.api.coordination.v1.Lease")["metadata"].Default; d != nil {
		t.Errorf("Lease.metadata default %v in v2", d)
	}
	if desc := props("io.k8s.api.coordination.v1.LeaseSpec")["holderIdentity"].Description; !strings.Contains(desc, "identity of the holder") {
		t.Errorf("LeaseSpec.holderIdentity description %q", desc)
	}
}

func TestV2Protobuf(t *testing.T) {
	s := newService(t)
	resp, body := get(t, s, "/openapi/v2", v2ProtoType)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("status %s, Content-Type %q", resp.Status, ct)
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	// 6 discovery and version paths, 6 for each of Leases, Endpoints
	// and Namespaces (status and finalize included); for EndpointSlices
	// 2 discovery paths and 6; for Events 2 discovery paths and 6 in each
	// of their two groups; 2 discovery paths and 20 for RBAC's four kinds.
	if got := len(doc.GetPaths().GetPath()); got != 68 {
		t.Errorf("%d paths, want 68", got)
	}
	jsonResp, _ := get(t, s, "/openapi/v2", "")
	if resp.Header.Get("Etag") != jsonResp.Header.Get("Etag") || resp.Header.Get("Etag") == "" {
		t.Errorf("ETags %q (protobuf) and %q (JSON) differ", resp.Header.Get("Etag"), jsonResp.Header.Get("Etag"))
	}
}

func TestV3Index(t *testing.T) {
	s := newService(t)
	resp, body := get(t, s, "/openapi/v3", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range index.Paths {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"api", "api/v1", "apis", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1", "apis/discovery.k8s.io", "apis/discovery.k8s.io/v1", "apis/events.k8s.io", "apis/events.k8s.io/v1", "apis/rbac.authorization.k8s.io", "apis/rbac.authorization.k8s.io/v1", "version"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("documents (-want +got):\n%s", diff)
	}

	var all []operation
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			url := index.Paths[name].ServerRelativeURL
			path, hash, ok := strings.Cut(url, "?hash=")
			if !ok || path != "/openapi/v3/"+name || len(hash) != 128 {
				t.Fatalf("serverRelativeURL %q", url)
			}
			resp, body := get(t, s, url, "application/json")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", url, resp.Status)
			}
			if etag := resp.Header.Get("Etag"); etag != `"`+hash+`"` {
				t.Errorf("ETag %s, want the hash %q", etag, hash)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "public, immutable" {
				t.Errorf("Cache-Control %q", cc)
			}
			var doc spec3.OpenAPI
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			for op := range v3Operations(&doc) {
				// A path belongs to the document with the longest root
				// prefixing it.
				owner := ""
				for _, n := range names {
					if strings.HasPrefix(op.Path, "/"+n+"/") && len(n) > len(owner) {
						owner = n
					}
				}
				if owner != name {
					t.Errorf("%s: path %s belongs in document %q", op.ID, op.Path, owner)
				}
				all = append(all, op)
			}
			// Every reference resolves within the document.
			for _, m := range regexpRefs(body) {
				if _, ok := doc.Components.Schemas[strings.TrimPrefix(m, "#/components/schemas/")]; !ok {
					t.Errorf("dangling reference %s", m)
				}
			}

			pb, pbBody := get(t, s, url, v3ProtoType)
			var pdoc openapi_v3.Document
			if pb.StatusCode != http.StatusOK || proto.Unmarshal(pbBody, &pdoc) != nil || len(pdoc.GetPaths().GetPath()) != len(doc.Paths.Paths) {
				t.Errorf("protobuf: status %s, %d paths", pb.Status, len(pdoc.GetPaths().GetPath()))
			}
		})
	}
	sortOperations(all)
	wantOps := slices.Clone(wantOperations)
	sortOperations(wantOps)
	if diff := cmp.Diff(wantOps, all); diff != "" {
		t.Errorf("v3 operations (-want +got):\n%s", diff)
	}

	// A stale hash redirects to the current one.
	resp, _ = get(t, s, "/openapi/v3/api/v1?hash=0123", "")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != index.Paths["api/v1"].ServerRelativeURL {
		t.Errorf("stale hash: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

// regexpRefs returns the $ref values in a JSON document.
func regexpRefs(body []byte) []string {
	var refs []string
	for _, part := range strings.Split(string(body), `"$ref":"`)[1:] {
		ref, _, _ := strings.Cut(part, `"`)
		refs = append(refs, ref)
	}
	return refs
}

// The v3 documents narrow the kinds registered in every group to their
// own group version and core v1, as kube-apiserver does.
func TestV3GroupVersionKinds(t *testing.T) {
	s := newService(t)
	for doc, want := range map[string][]any{
		"/openapi/v3/api/v1": {map[string]any{"group": "", "version": "v1", "kind": "DeleteOptions"}},
		"/openapi/v3/apis/coordination.k8s.io/v1": {
			map[string]any{"group": "", "version": "v1", "kind": "DeleteOptions"},
			map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "DeleteOptions"},
		},
	} {
		_, body := get(t, s, doc, "")
		var d spec3.OpenAPI
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		got := d.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].Extensions[gvkExt]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s DeleteOptions GVKs (-want +got):\n%s", doc, diff)
		}
	}
}

func TestNotFound(t *testing.T) {
	s := newService(t)
	for _, path := range []string{"/openapi", "/openapi/", "/openapi/v2/", "/openapi/v3/", "/openapi/v3/apis/apps/v1", "/openapi/v3/api/v2", "/openapi/v4"} {
		if resp, _ := get(t, s, path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
	if resp, _ := get(t, s, "/openapi/v2", "text/html"); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("GET /openapi/v2 as text/html: %s, want 406", resp.Status)
	}
}

// Concurrent first requests for the lazily converted protobuf forms get
// the same bytes.
func TestConcurrentRequests(t *testing.T) {
	s := newService(t)
	gets := [][2]string{{"/openapi/v2", ""}, {"/openapi/v2", v2ProtoType}, {"/openapi/v3", ""}}
	for _, doc := range []string{"api", "api/v1", "apis", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1", "version"} {
		gets = append(gets, [2]string{"/openapi/v3/" + doc, ""}, [2]string{"/openapi/v3/" + doc, v3ProtoType})
	}
	const workers = 4
	bodies := make([][][]byte, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for _, g := range gets {
				r := httptest.NewRequest(http.MethodGet, g[0], nil)
				r.Header.Set("Accept", g[1])
				w := httptest.NewRecorder()
				s.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Errorf("GET %s as %q: %d", g[0], g[1], w.Code)
				}
				bodies[i] = append(bodies[i], w.Body.Bytes())
			}
		})
	}
	wg.Wait()
	for i := 1; i < workers; i++ {
		for j, g := range gets {
			if !bytes.Equal(bodies[0][j], bodies[i][j]) {
				t.Errorf("GET %s as %q: bodies differ", g[0], g[1])
			}
		}
	}
}

// TestDefinitionsCoverKinds: the generated definitions hold every served
// version's types; a kind added to the list without regenerating them
// fails here first.
func TestDefinitionsCoverKinds(t *testing.T) {
	defs := definitions.GetOpenAPIDefinitions(func(string) spec.Ref { return spec.Ref{} })
	for _, k := range served() {
		for _, v := range k.Versions {
			for _, obj := range []any{v.New(), v.NewList()} {
				if name := util.GetCanonicalTypeName(obj); defs[name].Schema.Type == nil {
					t.Errorf("no definition of %s: run go generate ./internal/openapi/...", name)
				}
			}
		}
	}
}
