package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

var (
	leasesGVR     = coordinationv1.SchemeGroupVersion.WithResource("leases")
	endpointsGVR  = corev1.SchemeGroupVersion.WithResource("endpoints")
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
)

// contentTypes records the Content-Type of every response.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *contentTypes) add(ct string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	base, _, _ := strings.Cut(ct, ";")
	c.seen[base] = true
}

func (c *contentTypes) list() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for k := range c.seen {
		out[k] = true
	}
	return out
}

// metadataClient returns client-go's metadata client. It asks for
// protobuf first, as it always does; for "json" the protobuf choices are
// taken out of its Accept headers, so the JSON forms are exercised too.
func metadataClient(t *testing.T, s *testserver.Server, enc string) (metadata.Interface, *contentTypes) {
	t.Helper()
	cfg := metadata.ConfigFor(s.Config)
	seen := &contentTypes{}
	if enc == "json" {
		cfg.ContentType = "application/json"
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if enc == "json" {
				r = r.Clone(r.Context())
				var keep []string
				for a := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
					if !strings.HasPrefix(strings.TrimSpace(a), "application/vnd.kubernetes.protobuf") {
						keep = append(keep, a)
					}
				}
				r.Header.Set("Accept", strings.Join(keep, ","))
			}
			resp, err := rt.RoundTrip(r)
			// Errors are negotiated without the as= choices, so they come
			// back in JSON whatever was preferred, as from kube-apiserver.
			if err == nil && resp.StatusCode < 300 {
				seen.add(resp.Header.Get("Content-Type"))
			}
			return resp, err
		})
	})
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mc, seen
}

// TestPartialObjectMetadata drives the metadata client (as=PartialObjectMetadata
// and as=PartialObjectMetadataList, SPEC §9.1): get, list, watch, patch and
// delete of leases, endpoints and namespaces, in protobuf and JSON.
func TestPartialObjectMetadata(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, enc := range []string{"json", "protobuf"} {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := s.Client(t)
			mc, seen := metadataClient(t, s, enc)
			ns := "meta-" + enc
			must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
			var typed []coordinationv1.Lease
			for i := range 3 {
				typed = append(typed, *must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%d", i), Labels: map[string]string{"app": "x", "i": fmt.Sprint(i)},
						Annotations: map[string]string{"note": "n"}, Finalizers: []string{"example.com/f"}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h")},
				}, metav1.CreateOptions{FieldManager: "creator"})))
			}
			ep := must[*corev1.Endpoints](t)(c.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ep", Labels: map[string]string{"app": "y"}},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}}}}, metav1.CreateOptions{}))

			// get
			leases := mc.Resource(leasesGVR).Namespace(ns)
			p, err := leases.Get(ctx, "l0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(typed[0].ObjectMeta, p.ObjectMeta); diff != "" {
				t.Errorf("lease metadata (-typed +partial):\n%s", diff)
			}
			if p.Kind != "" && (p.Kind != "PartialObjectMetadata" || p.APIVersion != "meta.k8s.io/v1") {
				t.Errorf("type meta %+v", p.TypeMeta)
			}
			pe := must[*metav1.PartialObjectMetadata](t)(mc.Resource(endpointsGVR).Namespace(ns).Get(ctx, "ep", metav1.GetOptions{}))
			if diff := cmp.Diff(ep.ObjectMeta, pe.ObjectMeta); diff != "" {
				t.Errorf("endpoints metadata (-typed +partial):\n%s", diff)
			}
			pn := must[*metav1.PartialObjectMetadata](t)(mc.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{}))
			if pn.Name != ns || pn.Labels["kubernetes.io/metadata.name"] != ns {
				t.Errorf("namespace metadata %+v", pn.ObjectMeta)
			}
			_, err = leases.Get(ctx, "nope", metav1.GetOptions{})
			wantStatus(t, err, http.StatusNotFound, metav1.StatusReasonNotFound)

			// list
			list := must[*metav1.PartialObjectMetadataList](t)(leases.List(ctx, metav1.ListOptions{LabelSelector: "app=x,i!=2"}))
			var got []metav1.ObjectMeta
			for _, it := range list.Items {
				got = append(got, it.ObjectMeta)
			}
			if diff := cmp.Diff([]metav1.ObjectMeta{typed[0].ObjectMeta, typed[1].ObjectMeta}, got); diff != "" {
				t.Errorf("list items (-typed +partial):\n%s", diff)
			}
			if list.ResourceVersion == "" {
				t.Error("list has no resourceVersion")
			}
			paged := must[*metav1.PartialObjectMetadataList](t)(leases.List(ctx, metav1.ListOptions{Limit: 2}))
			if len(paged.Items) != 2 || paged.Continue == "" {
				t.Errorf("first page: %d items, continue %q", len(paged.Items), paged.Continue)
			}
			rest := must[*metav1.PartialObjectMetadataList](t)(leases.List(ctx, metav1.ListOptions{Limit: 2, Continue: paged.Continue}))
			if len(rest.Items) != 1 || rest.Items[0].Name != "l2" || rest.Continue != "" {
				t.Errorf("second page: %+v", rest)
			}
			all := must[*metav1.PartialObjectMetadataList](t)(mc.Resource(endpointsGVR).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns}))
			if len(all.Items) != 1 || all.Items[0].Name != "ep" {
				t.Errorf("endpoints across namespaces: %+v", all.Items)
			}

			// watch, patch, delete
			w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			nextMeta := func(typ watch.EventType, name string) *metav1.PartialObjectMetadata {
				t.Helper()
				ev := next(t, w)
				pm, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if ev.Type != typ || !ok || pm.Name != name {
					t.Fatalf("got %s %T %+v, want %s of %s", ev.Type, ev.Object, ev.Object, typ, name)
				}
				return pm
			}
			created := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l3"}}, metav1.CreateOptions{}))
			if ev := nextMeta(watch.Added, "l3"); ev.ResourceVersion != created.ResourceVersion || ev.UID != created.UID {
				t.Errorf("ADDED %+v, want rv %s", ev.ObjectMeta, created.ResourceVersion)
			}
			patched := must[*metav1.PartialObjectMetadata](t)(leases.Patch(ctx, "l3", types.MergePatchType, []byte(`{"metadata":{"labels":{"new":"1"}}}`), metav1.PatchOptions{}))
			if patched.Labels["new"] != "1" {
				t.Errorf("patch through the metadata client: %+v", patched.ObjectMeta)
			}
			if ev := nextMeta(watch.Modified, "l3"); ev.ResourceVersion != patched.ResourceVersion || ev.Labels["new"] != "1" {
				t.Errorf("MODIFIED %+v, want rv %s", ev.ObjectMeta, patched.ResourceVersion)
			}
			if err := leases.Delete(ctx, "l3", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			nextMeta(watch.Deleted, "l3")
			// A delete of an object with finalizers answers the object;
			// the metadata client only needs the status code.
			if err := leases.Delete(ctx, "l0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if ev := nextMeta(watch.Modified, "l0"); ev.DeletionTimestamp == nil {
				t.Errorf("delete with a finalizer: %+v", ev.ObjectMeta)
			}

			want := map[string]bool{"application/json": true}
			if enc == "protobuf" {
				want = map[string]bool{"application/vnd.kubernetes.protobuf": true}
			}
			if diff := cmp.Diff(want, seen.list()); diff != "" {
				t.Errorf("response content types (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPartialObjectMetadataNegotiation checks the pairing rules of the
// as= transforms over raw HTTP: PartialObjectMetadata for objects,
// PartialObjectMetadataList for lists, v1 and v1beta1.
func TestPartialObjectMetadataNegotiation(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	must[*coordinationv1.Lease](t)(s.Client(t).CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}))
	cases := []struct {
		name, path, accept string
		code               int
		kind, apiVersion   string
	}{
		{"object as PartialObjectMetadata", leasesPath + "/a", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 200, "PartialObjectMetadata", "meta.k8s.io/v1"},
		{"object as v1beta1", leasesPath + "/a", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", 200, "PartialObjectMetadata", "meta.k8s.io/v1beta1"},
		{"list as PartialObjectMetadataList", leasesPath, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 200, "PartialObjectMetadataList", "meta.k8s.io/v1"},
		{"list as PartialObjectMetadata", leasesPath, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 406, "Status", "v1"},
		{"object as PartialObjectMetadataList", leasesPath + "/a", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 406, "Status", "v1"},
		{"fallback to the plain object", leasesPath + "/a", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", 200, "Lease", "coordination.k8s.io/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, s, "GET", tc.path, map[string]string{"Accept": tc.accept}, "")
			var tm metav1.TypeMeta
			if err := json.Unmarshal(r.body, &tm); err != nil {
				t.Fatalf("%d %s", r.code, r.body)
			}
			if r.code != tc.code || tm.Kind != tc.kind || tm.APIVersion != tc.apiVersion {
				t.Errorf("%d %s %s, want %d %s %s: %s", r.code, tm.Kind, tm.APIVersion, tc.code, tc.kind, tc.apiVersion, r.body)
			}
		})
	}
}

// TestMetadataInformer runs a metadata-only informer on leases (what
// controller-runtime's metadata watches and the garbage collector use)
// and checks it syncs and follows changes.
func TestMetadataInformer(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, enc := range []string{"json", "protobuf"} {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			c := s.Client(t)
			mc, _ := metadataClient(t, s, enc)
			ns := "inf-" + enc
			must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
			for i := range 5 {
				must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%d", i)}}, metav1.CreateOptions{}))
			}
			factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, ns, nil)
			inf := factory.ForResource(leasesGVR)
			informer := inf.Informer()
			factory.Start(ctx.Done())
			defer factory.Shutdown()
			defer cancel()
			if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				t.Fatal("metadata informer did not sync")
			}
			inSync := func() string {
				l := must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}))
				return cmp.Diff(versions(ptrs(l.Items)), storeVersions(informer.GetStore()))
			}
			waitInSyncWith(t, inSync)

			must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{}))
			must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Patch(ctx, "l1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}))
			if err := c.CoordinationV1().Leases(ns).Delete(ctx, "l2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitInSyncWith(t, inSync)
			obj, err := inf.Lister().ByNamespace(ns).Get("l1")
			if err != nil {
				t.Fatal(err)
			}
			if pm, ok := obj.(*metav1.PartialObjectMetadata); !ok || pm.Labels["x"] != "y" {
				t.Errorf("lister has %T %+v", obj, obj)
			}
		})
	}
}

// waitInSyncWith polls diff until it is empty, failing after 20 s with
// the last difference.
func waitInSyncWith(t *testing.T, diff func() string) {
	t.Helper()
	var d string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if d = diff(); d == "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("informer out of sync with a fresh list (-list +informer):\n%s", d)
}

// TestLeaseTable checks the server-side table of leases (SPEC §1.6 plus
// leasehold's -o wide columns), endpoints and namespaces, and includeObject.
func TestLeaseTable(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	now := time.Now()
	mk := func(name string, spec coordinationv1.LeaseSpec) {
		must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}))
	}
	mk("bare", coordinationv1.LeaseSpec{})
	mk("held", coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](3600), LeaseTransitions: ptr[int32](0),
		RenewTime: &metav1.MicroTime{Time: now}})
	mk("expired", coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](15), LeaseTransitions: ptr[int32](7),
		RenewTime: &metav1.MicroTime{Time: now.Add(-30 * 24 * time.Hour)}})
	// As client-go's release() leaves it: released, never expired.
	mk("released", coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr[int32](1), RenewTime: &metav1.MicroTime{Time: now.Add(-12 * time.Hour)}})
	// Held without a renewTime: no term, expired (lease.Term).
	mk("noterm", coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](15)})

	const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	r := do(t, s, "GET", leasesPath, map[string]string{"Accept": tableAccept}, "")
	var table metav1.Table
	if err := json.Unmarshal(r.body, &table); err != nil || r.code != 200 {
		t.Fatalf("%d %v %s", r.code, err, r.body)
	}
	if table.Kind != "Table" || table.APIVersion != "meta.k8s.io/v1" || table.ResourceVersion == "" {
		t.Errorf("table meta %+v %+v", table.TypeMeta, table.ListMeta)
	}
	type col struct {
		Name, Type, Format string
		Priority           int32
	}
	var cols []col
	for _, cd := range table.ColumnDefinitions {
		cols = append(cols, col{cd.Name, cd.Type, cd.Format, cd.Priority})
		if cd.Description == "" {
			t.Errorf("column %s has no description", cd.Name)
		}
	}
	// kube-apiserver's own columns carry its descriptions
	// (pkg/printers/internalversion/printers.go).
	wantDesc := map[string]string{
		"Name":   metav1.ObjectMeta{}.SwaggerDoc()["name"],
		"Holder": coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"],
		"Age":    metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	}
	for _, cd := range table.ColumnDefinitions {
		if want, ok := wantDesc[cd.Name]; ok && cd.Description != want {
			t.Errorf("column %s description %q, want %q", cd.Name, cd.Description, want)
		}
	}
	wantCols := []col{{"Name", "string", "name", 0}, {"Holder", "string", "", 0}, {"Age", "string", "", 0},
		{"Duration", "string", "", 1}, {"Renewed", "string", "", 1}, {"Transitions", "string", "", 1}, {"Expired", "string", "", 1}}
	if diff := cmp.Diff(wantCols, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	var rows [][]any
	for _, row := range table.Rows {
		cells := row.Cells
		// Age of a lease created by this test: a few seconds at most.
		if age, _ := cells[2].(string); !strings.HasSuffix(age, "s") || len(age) > 3 {
			t.Errorf("%v: age %q", cells[0], cells[2])
		}
		cells = append(cells[:2:2], cells[3:]...)
		if cells[3] != "<none>" && cells[0] == "held" {
			if rn, _ := cells[3].(string); strings.HasSuffix(rn, "s") && len(rn) <= 3 {
				cells[3] = "<recent>"
			}
		}
		rows = append(rows, cells)
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(row.Object.Raw, &meta); err != nil || meta.Kind != "PartialObjectMetadata" || meta.Name != cells[0] {
			t.Errorf("row object (includeObject defaults to Metadata): %v %s", err, row.Object.Raw)
		}
	}
	wantRows := [][]any{
		{"bare", "", "<none>", "<none>", "<none>", "false"},
		{"expired", "bob", "15s", "30d", "7", "true"},
		{"held", "alice", "3600s", "<recent>", "0", "false"},
		{"noterm", "carol", "15s", "<none>", "<none>", "true"},
		{"released", "", "1s", "12h", "<none>", "false"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("rows without Age (-want +got):\n%s", diff)
	}

	// includeObject
	for _, tc := range []struct {
		param, kind string
	}{{"None", ""}, {"Metadata", "PartialObjectMetadata"}, {"Object", "Lease"}} {
		r := do(t, s, "GET", leasesPath+"/held?includeObject="+tc.param, map[string]string{"Accept": tableAccept}, "")
		var one metav1.Table
		if err := json.Unmarshal(r.body, &one); err != nil || len(one.Rows) != 1 {
			t.Fatalf("includeObject=%s: %d %v %s", tc.param, r.code, err, r.body)
		}
		var tm struct {
			metav1.TypeMeta
			Spec *coordinationv1.LeaseSpec `json:"spec"`
		}
		if tc.kind != "" {
			if err := json.Unmarshal(one.Rows[0].Object.Raw, &tm); err != nil {
				t.Fatal(err)
			}
		} else if len(one.Rows[0].Object.Raw) != 0 {
			t.Errorf("includeObject=None: row object %s", one.Rows[0].Object.Raw)
		}
		if tm.Kind != tc.kind || (tc.kind == "Lease") != (tm.Spec != nil) {
			t.Errorf("includeObject=%s: row object %s", tc.param, one.Rows[0].Object.Raw)
		}
	}
	r = do(t, s, "GET", leasesPath+"?includeObject=Everything", map[string]string{"Accept": tableAccept}, "")
	if r.code != 400 {
		t.Errorf("includeObject=Everything: %d %s", r.code, r.body)
	}

	// Endpoints and namespaces keep kube-apiserver's columns.
	must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "many"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "fd00::1"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Name: "a", Port: 80}, {Name: "b", Port: 443}}}}}, metav1.CreateOptions{}))
	must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "none"}}, metav1.CreateOptions{}))
	must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "unready"},
		Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{}))
	for _, tc := range []struct {
		path     string
		cols     []string
		wantRows [][]any
	}{
		{endpointsPath, []string{"Name", "Endpoints", "Age"}, [][]any{
			{"many", "10.0.0.1:80,10.0.0.2:80,[fd00::1]:80 + 3 more..."},
			{"none", "<none>"},
			{"unready", ""},
		}},
		{"/api/v1/namespaces?fieldSelector=metadata.name=default", []string{"Name", "Status", "Age"}, [][]any{{"default", "Active"}}},
	} {
		r := do(t, s, "GET", tc.path, map[string]string{"Accept": tableAccept}, "")
		var table metav1.Table
		if err := json.Unmarshal(r.body, &table); err != nil || r.code != 200 {
			t.Fatalf("%s: %d %v %s", tc.path, r.code, err, r.body)
		}
		var cols []string
		for _, cd := range table.ColumnDefinitions {
			cols = append(cols, cd.Name)
			if cd.Priority != 0 {
				t.Errorf("%s: column %s has priority %d", tc.path, cd.Name, cd.Priority)
			}
		}
		var rows [][]any
		for _, row := range table.Rows {
			rows = append(rows, row.Cells[:2])
		}
		if diff := cmp.Diff(tc.cols, cols) + cmp.Diff(tc.wantRows, rows); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.path, diff)
		}
	}
}
