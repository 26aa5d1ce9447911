package integration

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func TestDiscovery(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(s.Config)

	check := func(t *testing.T, resources []*metav1.APIResourceList) {
		t.Helper()
		byGV := map[string]map[string]metav1.APIResource{}
		for _, l := range resources {
			byGV[l.GroupVersion] = map[string]metav1.APIResource{}
			for _, r := range l.APIResources {
				byGV[l.GroupVersion][r.Name] = r
			}
		}
		lease := byGV["coordination.k8s.io/v1"]["leases"]
		if lease.Kind != "Lease" || !lease.Namespaced || lease.SingularName != "lease" ||
			!slices.Equal(lease.Verbs, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}) {
			t.Errorf("leases: %+v", lease)
		}
		ep := byGV["v1"]["endpoints"]
		if ep.Kind != "Endpoints" || !slices.Equal(ep.ShortNames, []string{"ep"}) || ep.SingularName != "endpoints" {
			t.Errorf("endpoints: %+v", ep)
		}
		ns := byGV["v1"]["namespaces"]
		if ns.Namespaced || slices.Contains(ns.Verbs, "deletecollection") {
			t.Errorf("namespaces: %+v", ns)
		}
		if st, ok := byGV["v1"]["namespaces/status"]; !ok || !slices.Equal(st.Verbs, []string{"get", "patch", "update"}) {
			t.Errorf("namespaces/status: %+v", st)
		}
		if fin, ok := byGV["v1"]["namespaces/finalize"]; !ok || !slices.Equal(fin.Verbs, []string{"update"}) {
			t.Errorf("namespaces/finalize: %+v", fin)
		}
		// EndpointSlices have no short name.
		slice := byGV["discovery.k8s.io/v1"]["endpointslices"]
		if slice.Kind != "EndpointSlice" || !slice.Namespaced || slice.SingularName != "endpointslice" || len(slice.ShortNames) != 0 ||
			!slices.Equal(slice.Verbs, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}) {
			t.Errorf("endpointslices: %+v", slice)
		}
		// Events in both groups.
		for _, gv := range []string{"v1", "events.k8s.io/v1"} {
			ev := byGV[gv]["events"]
			if ev.Kind != "Event" || !ev.Namespaced || ev.SingularName != "event" || !slices.Equal(ev.ShortNames, []string{"ev"}) || len(ev.Verbs) != 8 {
				t.Errorf("%s events: %+v", gv, ev)
			}
		}
	}

	// client-go asks for aggregated discovery first.
	_, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	check(t, resources)

	// The legacy per-group-version documents say the same.
	var legacy []*metav1.APIResourceList
	for _, gv := range []string{"v1", "coordination.k8s.io/v1", "events.k8s.io/v1", "discovery.k8s.io/v1"} {
		l, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatal(err)
		}
		legacy = append(legacy, l)
	}
	check(t, legacy)
	if l := legacy[1]; l.APIResources[0].StorageVersionHash != "gqkMMb/YqFM=" {
		t.Errorf("lease storageVersionHash %q", l.APIResources[0].StorageVersionHash)
	}
	if l := legacy[0]; l.APIResources[0].StorageVersionHash != "fWeeMqaN/OA=" {
		t.Errorf("endpoints storageVersionHash %q", l.APIResources[0].StorageVersionHash)
	}
	if l := legacy[3]; len(l.APIResources) != 1 || l.APIResources[0].StorageVersionHash != "qgS0xkrxYAI=" {
		t.Errorf("endpointslices: %+v", l.APIResources)
	}
	// Events, stored once, have kube-apiserver's hash of core v1 Event in
	// both groups.
	for _, l := range []*metav1.APIResourceList{legacy[0], legacy[2]} {
		for _, r := range l.APIResources {
			if r.Name == "events" && r.StorageVersionHash != "r2yiGXH7wu8=" {
				t.Errorf("%s events storageVersionHash %q", l.GroupVersion, r.StorageVersionHash)
			}
		}
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name+"="+g.PreferredVersion.GroupVersion)
	}
	want := []string{"=v1", "authentication.k8s.io=authentication.k8s.io/v1", "authorization.k8s.io=authorization.k8s.io/v1", "coordination.k8s.io=coordination.k8s.io/v1", "discovery.k8s.io=discovery.k8s.io/v1", "events.k8s.io=events.k8s.io/v1", "rbac.authorization.k8s.io=rbac.authorization.k8s.io/v1"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}

	// Aggregated discovery answers with its media type, an ETag, and 304
	// for a matching If-None-Match.
	const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	r := do(t, s, "GET", "/apis", map[string]string{"Accept": accept}, "")
	if r.code != 200 || r.header.Get("Content-Type") != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" || r.header.Get("ETag") == "" {
		t.Fatalf("aggregated /apis: %d %v", r.code, r.header)
	}
	sum := sha512.Sum512(r.body[:len(r.body)-1]) // the hash of the JSON, without the newline
	if etag := `"` + strings.ToUpper(hex.EncodeToString(sum[:])) + `"`; r.header.Get("ETag") != etag || r.header.Get("Vary") != "Accept" || r.header.Get("Cache-Control") != "public" {
		t.Errorf("aggregated /apis headers %v, want ETag %s, Vary Accept, Cache-Control public", r.header, etag)
	}
	r2 := do(t, s, "GET", "/apis", map[string]string{"Accept": accept, "If-None-Match": r.header.Get("ETag")}, "")
	if r2.code != 304 {
		t.Errorf("If-None-Match: %d", r2.code)
	}
	// v2beta1 is no longer aggregated (Kubernetes 1.35 locks
	// AggregatedDiscoveryRemoveBetaType on): kube-apiserver negotiates it
	// like any unknown media type, so older clients that list
	// application/json after it get the plain documents, and a client
	// asking for v2beta1 alone gets 406.
	const v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	for _, path := range []string{"/api", "/apis"} {
		r := do(t, s, "GET", path, map[string]string{"Accept": v2beta1 + ",application/json"}, "")
		if r.code != 200 || r.header.Get("Content-Type") != "application/json" || !strings.Contains(string(r.body), `"kind":"API`) {
			t.Errorf("%s preferring v2beta1: %d %v %.100s, want the plain document", path, r.code, r.header, r.body)
		}
		r = do(t, s, "GET", path, map[string]string{"Accept": v2beta1}, "")
		if r.code != 406 {
			t.Errorf("%s with v2beta1 alone: %d %s, want 406", path, r.code, r.body)
		}
	}
	r = do(t, s, "GET", "/api", nil, "")
	var versions metav1.APIVersions
	if err := json.Unmarshal(r.body, &versions); err != nil || !slices.Equal(versions.Versions, []string{"v1"}) || len(versions.ServerAddressByClientCIDRs) != 1 {
		t.Errorf("/api: %s", r.body)
	}

	// /version and the health endpoints.
	v, err := dc.ServerVersion()
	if err != nil || v.Major != "1" || v.Minor != "37" || v.GitVersion == "" {
		t.Errorf("version %+v %v", v, err)
	}
	r = do(t, s, "GET", "/readyz?verbose", nil, "")
	if r.code != 200 || !contains(string(r.body), "[+]ping ok") || !contains(string(r.body), "readyz check passed") {
		t.Errorf("/readyz?verbose: %d %s", r.code, r.body)
	}
	if r = do(t, s, "GET", "/livez/ping", nil, ""); r.code != 200 || string(r.body) != "ok" {
		t.Errorf("/livez/ping: %d %s", r.code, r.body)
	}
}
