// Package kindtest is the conformance suite every kind's description runs
// (in the spirit of k8s.io/apiserver's registry tests): against a real
// server, through client-go's dynamic client, discovery and OpenAPI
// clients and plain REST requests, it checks that the generic machinery
// serves the kind as kube-apiserver would: create, get, update with and
// without resourceVersion, delete with preconditions, lists with
// selectors and pages, a watch from a resourceVersion, tables, JSON, YAML
// and (for kinds that have one) protobuf round trips, and validation
// answers. A kind's own rules stay in its package's tests.
//
// Only tests import it.
package kindtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// Fixture is what the suite needs of a kind beyond its description.
type Fixture struct {
	// Resource is the kind at the version under test.
	Resource resources.Resource
	// Namespace holds the suite's objects of a namespaced kind; it must
	// exist.
	Namespace string
	// Content returns the fields of a valid object besides apiVersion,
	// kind and metadata (nil: none), as JSON would decode them.
	Content func() map[string]any
	// Change makes a valid change to an object's content.
	Change func(obj map[string]any)
	// Invalid makes an object invalid; InvalidField is the field of the
	// first cause of the 422 it gets.
	Invalid      func(obj map[string]any)
	InvalidField string
	// InvalidName is a name the kind refuses; "not:a:name" (no DNS
	// name) when empty. RBAC names need only be path segments.
	InvalidName string
}

// Run runs the suite as subtests of t against s.
func Run(t *testing.T, s *testserver.Server, f Fixture) {
	k := &kindSuite{t: t, s: s, f: f, run: strings.ReplaceAll(uuid.NewString(), "-", "")[:12]}
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	k.dyn = dyn.Resource(f.Resource.GroupVersionResource())
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Discovery", k.testDiscovery},
		{"OpenAPI", k.testOpenAPI},
		{"CreateGetUpdateDelete", k.testCRUD},
		{"UpdateRules", k.testUpdateRules},
		{"DeletePreconditions", k.testDeletePreconditions},
		{"ListSelectorsAndPages", k.testList},
		{"WatchFromResourceVersion", k.testWatch},
		{"Table", k.testTable},
		{"Encodings", k.testEncodings},
		{"Validation", k.testValidation},
	} {
		t.Run(tc.name, tc.run)
	}
}

type kindSuite struct {
	t   *testing.T
	s   *testserver.Server
	f   Fixture
	dyn dynamic.NamespaceableResourceInterface
	// run labels the objects of this run (label "kindtest-run"), so that
	// runs sharing a kind do not see each other's objects.
	run string
}

func (k *kindSuite) kind() *resources.Kind { return k.f.Resource.Kind }

// client is the dynamic client of the suite's namespace (or the cluster).
func (k *kindSuite) client() dynamic.ResourceInterface {
	if k.kind().Namespaced {
		return k.dyn.Namespace(k.f.Namespace)
	}
	return k.dyn
}

// object returns a valid object named name (a prefix of the test's name).
func (k *kindSuite) object(t *testing.T, name string, labels map[string]string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if k.f.Content != nil {
		u.Object = k.f.Content()
	}
	u.SetAPIVersion(k.f.Resource.APIVersion())
	u.SetKind(k.kind().Names.Kind)
	u.SetName(name)
	if k.kind().Namespaced {
		u.SetNamespace(k.f.Namespace)
	}
	all := map[string]string{"kindtest-run": k.run}
	for key, v := range labels {
		all[key] = v
	}
	u.SetLabels(all)
	return u
}

// selector selects the objects of this run with the label set sel.
func (k *kindSuite) selector(sel string) string { return "kindtest-run=" + k.run + "," + sel }

// name makes an object name of the subtest's own.
func name(t *testing.T, suffix string) string {
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if i := strings.LastIndex(n, "-"); i >= 0 {
		n = n[i+1:]
	}
	return n + "-" + suffix
}

func (k *kindSuite) testDiscovery(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(k.s.Config))
	if err != nil {
		t.Fatal(err)
	}
	gv := k.f.Resource.GroupVersion().String()
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if err != nil {
		t.Fatalf("discovery of %s: %v", gv, err)
	}
	i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == k.kind().Names.Plural })
	if i < 0 {
		t.Fatalf("discovery of %s lacks %s", gv, k.kind().Names.Plural)
	}
	got := list.APIResources[i]
	want := metav1.APIResource{
		Name: k.kind().Names.Plural, SingularName: k.kind().Names.Singular, Namespaced: k.kind().Namespaced,
		Kind: k.kind().Names.Kind, Verbs: k.kind().ServedVerbs(), ShortNames: k.kind().Names.ShortNames,
		StorageVersionHash: k.kind().StorageVersionHash(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("discovery entry (-want +got):\n%s", diff)
	}
	for _, sub := range k.kind().Subresources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == k.kind().Names.Plural+"/"+sub.Name }) {
			t.Errorf("discovery lacks subresource %s", sub.Name)
		}
	}
	// Aggregated discovery (what kubectl and client-go ask for first).
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("aggregated discovery: %v", err)
	}
	found := false
	for _, l := range lists {
		if l.GroupVersion != gv {
			continue
		}
		found = slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool {
			return r.Name == k.kind().Names.Plural && r.Kind == k.kind().Names.Kind && r.Namespaced == k.kind().Namespaced
		})
	}
	if !found {
		t.Errorf("aggregated discovery lacks %s in %s", k.kind().Names.Plural, gv)
	}
}

func (k *kindSuite) testOpenAPI(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(k.s.Config))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	gv := k.f.Resource.GroupVersion()
	key := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		key = "api/" + gv.Version
	}
	gvDoc, ok := paths[key]
	if !ok {
		t.Fatalf("/openapi/v3 has no %s", key)
	}
	raw, err := gvDoc.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]any
		Components struct {
			Schemas map[string]struct {
				Extensions []struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	gvk := k.f.Resource.GroupVersionKind()
	hasKind := false
	for _, s := range doc.Components.Schemas {
		for _, e := range s.Extensions {
			hasKind = hasKind || e.Group == gvk.Group && e.Version == gvk.Version && e.Kind == gvk.Kind
		}
	}
	if !hasKind {
		t.Errorf("the %s document has no schema for %s", key, gvk)
	}
	collection := "/" + key + "/" + k.kind().Names.Plural
	if k.kind().Namespaced {
		collection = "/" + key + "/namespaces/{namespace}/" + k.kind().Names.Plural
	}
	if _, ok := doc.Paths[collection]; !ok {
		t.Errorf("the %s document has no path %s", key, collection)
	}
}

func (k *kindSuite) testCRUD(t *testing.T) {
	ctx := t.Context()
	c := k.client()
	in := k.object(t, name(t, "a"), map[string]string{"suite": "crud"})
	created, err := c.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if ts := created.GetCreationTimestamp(); created.GetUID() == "" || created.GetResourceVersion() == "" || ts.IsZero() {
		t.Fatalf("system fields not set: %v", created.Object["metadata"])
	}
	got, err := c.Get(ctx, in.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if diff := cmp.Diff(created.Object, got.Object); diff != "" {
		t.Errorf("get differs from create (-create +get):\n%s", diff)
	}
	_, err = c.Create(ctx, in, metav1.CreateOptions{})
	wantMessage(t, "second create", err, apierrors.IsAlreadyExists,
		fmt.Sprintf("%s %q already exists", k.f.Resource.GroupResource(), in.GetName()))

	k.f.Change(got.Object)
	updated, err := c.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if rvAfter(t, updated.GetResourceVersion(), got.GetResourceVersion()) {
		t.Errorf("update kept resourceVersion %s", got.GetResourceVersion())
	}
	// An update that changes nothing keeps the resourceVersion.
	same, err := c.Update(ctx, updated.DeepCopy(), metav1.UpdateOptions{})
	if err != nil || same.GetResourceVersion() != updated.GetResourceVersion() {
		t.Errorf("no-op update: %v, resourceVersion %s -> %s", err, updated.GetResourceVersion(), same.GetResourceVersion())
	}

	if err := c.Delete(ctx, in.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// A kind whose deletion a controller finishes (a namespace) is gone a
	// little later.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err = c.Get(ctx, in.GetName(), metav1.GetOptions{})
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	se, ok := err.(apierrors.APIStatus)
	if !apierrors.IsNotFound(err) || !ok || se.Status().Message != fmt.Sprintf("%s %q not found", k.f.Resource.GroupResource(), in.GetName()) {
		t.Errorf("get after delete: %v, want kube-apiserver's 404", err)
	}
	if err := c.Delete(ctx, in.GetName(), metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v, want 404", err)
	}
}

// rvAfter reports whether resourceVersion a is not after b.
func rvAfter(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y int64
	if _, err := fmt.Sscan(a, &x); err != nil {
		t.Fatalf("resourceVersion %q: %v", a, err)
	}
	if _, err := fmt.Sscan(b, &y); err != nil {
		t.Fatalf("resourceVersion %q: %v", b, err)
	}
	return x <= y
}

func (k *kindSuite) testUpdateRules(t *testing.T) {
	ctx := t.Context()
	c := k.client()
	policy := k.kind().Updates

	// PUT to a missing name.
	missing := k.object(t, name(t, "missing"), nil)
	_, err := c.Update(ctx, missing, metav1.UpdateOptions{})
	switch {
	case policy.AllowCreateOnUpdate && err != nil:
		t.Errorf("PUT of a missing object: %v, want it created", err)
	case !policy.AllowCreateOnUpdate && !apierrors.IsNotFound(err):
		t.Errorf("PUT of a missing object: %v, want 404", err)
	}

	cur, err := c.Create(ctx, k.object(t, name(t, "a"), nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A stale resourceVersion: 409.
	next := cur.DeepCopy()
	k.f.Change(next.Object)
	if _, err := c.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := cur.DeepCopy()
	k.f.Change(stale.Object)
	k.f.Change(stale.Object)
	_, err = c.Update(ctx, stale, metav1.UpdateOptions{})
	wantMessage(t, "update at a stale resourceVersion", err, apierrors.IsConflict,
		fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", k.f.Resource.GroupResource(), cur.GetName()))

	// A uid in the body is a precondition.
	latest, err := c.Get(ctx, cur.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrongUID := latest.DeepCopy()
	wrongUID.SetUID("00000000-0000-0000-0000-000000000000")
	k.f.Change(wrongUID.Object)
	if _, err := c.Update(ctx, wrongUID, metav1.UpdateOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "Precondition failed: UID in precondition") {
		t.Errorf("update with another uid: %v, want a 409 precondition failure", err)
	}
	// System fields cannot be changed by an update.
	changed := latest.DeepCopy()
	changed.SetCreationTimestamp(metav1.NewTime(time.Unix(1, 0)))
	changed.SetGeneration(7)
	k.f.Change(changed.Object)
	out, err := c.Update(ctx, changed, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ts := out.GetCreationTimestamp(); !ts.Equal(ptr(latest.GetCreationTimestamp())) || out.GetGeneration() != latest.GetGeneration() {
		t.Errorf("system fields changed: creationTimestamp %v generation %d", ts, out.GetGeneration())
	}

	// No resourceVersion: an overwrite, or 422.
	noRV := out.DeepCopy()
	noRV.SetResourceVersion("")
	k.f.Change(noRV.Object)
	_, err = c.Update(ctx, noRV, metav1.UpdateOptions{})
	if policy.AllowUnconditionalUpdate {
		if err != nil {
			t.Errorf("update without resourceVersion: %v, want an overwrite", err)
		}
		return
	}
	// kube-apiserver names the plural resource here, not the kind.
	wantMessage(t, "update without resourceVersion", err, apierrors.IsInvalid,
		fmt.Sprintf("%s %q is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update", k.f.Resource.GroupResource(), cur.GetName()))
}

func ptr[T any](v T) *T { return &v }

// wantMessage fails unless err is the API error is tells, with message.
func wantMessage(t *testing.T, what string, err error, is func(error) bool, message string) {
	t.Helper()
	se, ok := err.(apierrors.APIStatus)
	if !is(err) || !ok || se.Status().Message != message {
		t.Errorf("%s: %v, want %q", what, err, message)
	}
}

func (k *kindSuite) testDeletePreconditions(t *testing.T) {
	ctx := t.Context()
	c := k.client()
	cur, err := c.Create(ctx, k.object(t, name(t, "a"), nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrongUID := types.UID("00000000-0000-0000-0000-000000000000")
	wrongRV := "1"
	for _, p := range []metav1.Preconditions{{UID: &wrongUID}, {ResourceVersion: &wrongRV}} {
		if err := c.Delete(ctx, cur.GetName(), metav1.DeleteOptions{Preconditions: &p}); !apierrors.IsConflict(err) {
			t.Errorf("delete with precondition %+v: %v, want 409", p, err)
		}
	}
	uid, rv := cur.GetUID(), cur.GetResourceVersion()
	if err := c.Delete(ctx, cur.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}); err != nil {
		t.Errorf("delete with matching preconditions: %v", err)
	}
}

func (k *kindSuite) testList(t *testing.T) {
	ctx := t.Context()
	c := k.client()
	var names []string
	for i, color := range []string{"red", "red", "blue"} {
		o, err := c.Create(ctx, k.object(t, name(t, fmt.Sprint(i)), map[string]string{"suite": "list", "color": color}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, o.GetName())
	}
	namesOf := func(l *unstructured.UnstructuredList) []string {
		var out []string
		for _, u := range l.Items {
			out = append(out, u.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		opts metav1.ListOptions
		want []string
	}{
		{metav1.ListOptions{LabelSelector: k.selector("suite=list")}, names},
		{metav1.ListOptions{LabelSelector: k.selector("suite=list,color=red")}, names[:2]},
		{metav1.ListOptions{LabelSelector: k.selector("suite=list,color notin (red)")}, names[2:]},
		{metav1.ListOptions{LabelSelector: k.selector("suite=list"), FieldSelector: "metadata.name=" + names[1]}, names[1:2]},
		{metav1.ListOptions{LabelSelector: k.selector("suite=list"), FieldSelector: "metadata.name!=" + names[1]}, []string{names[0], names[2]}},
	} {
		l, err := c.List(ctx, tc.opts)
		if err != nil {
			t.Fatalf("list %+v: %v", tc.opts, err)
		}
		if diff := cmp.Diff(tc.want, namesOf(l)); diff != "" {
			t.Errorf("list %+v (-want +got):\n%s", tc.opts, diff)
		}
	}
	// Pages of one, every page at the first page's revision.
	var paged []string
	opts := metav1.ListOptions{LabelSelector: k.selector("suite=list"), Limit: 1}
	var rv string
	for {
		l, err := c.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if rv == "" {
			rv = l.GetResourceVersion()
		} else if l.GetResourceVersion() != rv {
			t.Errorf("page at %s, first page at %s", l.GetResourceVersion(), rv)
		}
		paged = append(paged, namesOf(l)...)
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	if diff := cmp.Diff(names, paged); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if k.kind().Namespaced {
		l, err := k.dyn.List(ctx, metav1.ListOptions{LabelSelector: k.selector("suite=list")})
		if err != nil || len(l.Items) != len(names) {
			t.Errorf("list across namespaces: %v, %d items", err, len(l.Items))
		}
	}
	if _, err := c.List(ctx, metav1.ListOptions{FieldSelector: "no.such.field=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field selector: %v, want 400", err)
	}
}

func (k *kindSuite) testWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := k.client()
	start, err := c.Create(ctx, k.object(t, name(t, "a"), map[string]string{"suite": "watch"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: start.GetResourceVersion(), LabelSelector: k.selector("suite=watch")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := start.DeepCopy()
	k.f.Change(next.Object)
	updated, err := c.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, start.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []watch.EventType{watch.Modified, watch.Deleted} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			for want == watch.Deleted && ev.Type == watch.Modified && isObj && u.GetDeletionTimestamp() != nil {
				// Marked first, deleted once a controller is done (a
				// namespace): wait for the DELETED.
				select {
				case ev, ok = <-w.ResultChan():
				case <-ctx.Done():
					t.Fatal("no DELETED event")
				}
				if !ok {
					t.Fatal("watch ended")
				}
				u, isObj = ev.Object.(*unstructured.Unstructured)
			}
			if ev.Type != want || !isObj || u.GetName() != start.GetName() {
				t.Fatalf("event %s %v, want %s of %s", ev.Type, ev.Object, want, start.GetName())
			}
			if want == watch.Modified && u.GetResourceVersion() != updated.GetResourceVersion() {
				t.Errorf("MODIFIED at %s, the update is at %s", u.GetResourceVersion(), updated.GetResourceVersion())
			}
			if u.GetKind() != k.kind().Names.Kind || u.GetAPIVersion() != k.f.Resource.APIVersion() {
				t.Errorf("event object is %s %s", u.GetAPIVersion(), u.GetKind())
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
	}
}

// raw sends one request with the admin credentials and returns the answer.
func (k *kindSuite) raw(t *testing.T, method, path, accept, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	tr, err := rest.TransportFor(k.s.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, k.s.URL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// collection is the path of the resource's collection in the suite's
// namespace.
func (k *kindSuite) collection() string {
	gv := k.f.Resource.GroupVersion()
	p := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		p = "/api/" + gv.Version
	}
	if k.kind().Namespaced {
		p += "/namespaces/" + k.f.Namespace
	}
	return p + "/" + k.kind().Names.Plural
}

func (k *kindSuite) testTable(t *testing.T) {
	c := k.client()
	if _, err := c.Create(t.Context(), k.object(t, name(t, "a"), map[string]string{"suite": "table"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, body := k.raw(t, "GET", k.collection()+"?labelSelector="+url.QueryEscape(k.selector("suite=table")), "application/json;as=Table;v=v1;g=meta.k8s.io", "", nil)
	if code != http.StatusOK {
		t.Fatalf("table: %d %s", code, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, c := range table.ColumnDefinitions {
		got = append(got, c.Name)
	}
	for _, c := range k.kind().Table.Columns {
		want = append(want, c.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(want) {
		t.Fatalf("rows: %+v", table.Rows)
	}
	// The name is in the column of format "name" (the first, but for
	// Events).
	for i, c := range table.ColumnDefinitions {
		if c.Format == "name" && table.Rows[0].Cells[i] != name(t, "a") {
			t.Errorf("cell %d (%s) %v, want the name", i, c.Name, table.Rows[0].Cells[i])
		}
	}
}

func (k *kindSuite) testEncodings(t *testing.T) {
	c := k.client()
	// A YAML body, read back as YAML and as JSON.
	in := k.object(t, name(t, "yaml"), map[string]string{"suite": "encodings"})
	y, err := yaml.Marshal(in.Object)
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := k.raw(t, "POST", k.collection(), "application/yaml", "application/yaml", y)
	if code != http.StatusCreated {
		t.Fatalf("create from YAML: %d %s", code, body)
	}
	// Both answers as encoding/json reads them, numbers and all.
	var fromYAML, fromJSON map[string]any
	j, err := yaml.YAMLToJSON(body)
	if err != nil {
		t.Fatalf("YAML answer: %v", err)
	}
	if err := json.Unmarshal(j, &fromYAML); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(t.Context(), in.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := got.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
		t.Errorf("YAML answer and JSON read differ (-json +yaml):\n%s", diff)
	}

	// Protobuf, for kinds whose types have it; the others answer JSON to a
	// client that accepts both, as kube-apiserver serves custom resources.
	path := k.collection() + "/" + in.GetName()
	code, h, body := k.raw(t, "GET", path, "application/vnd.kubernetes.protobuf,application/json", "", nil)
	if code != http.StatusOK {
		t.Fatalf("get as protobuf: %d %s", code, body)
	}
	obj := k.f.Resource.New()
	if !k.f.Resource.Protobuf() {
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("a kind without protobuf answered %s", ct)
		}
		return
	}
	if ct := h.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("protobuf answer: %s", ct)
	}
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(k.f.Resource.GroupVersionKind(), k.f.Resource.New())
	if _, _, err := protobuf.NewSerializer(scheme, scheme).Decode(body, nil, obj); err != nil {
		t.Fatalf("decoding the protobuf answer: %v", err)
	}
	typed := k.f.Resource.New()
	if err := json.Unmarshal(data, typed); err != nil {
		t.Fatal(err)
	}
	// Protobuf carries no apiVersion and kind inside the object.
	typed.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	if diff := cmp.Diff(typed, obj); diff != "" {
		t.Errorf("protobuf and JSON answers differ (-json +protobuf):\n%s", diff)
	}
}

func (k *kindSuite) testValidation(t *testing.T) {
	bad := k.object(t, name(t, "bad"), nil)
	k.f.Invalid(bad.Object)
	_, err := k.client().Create(t.Context(), bad, metav1.CreateOptions{})
	se, ok := err.(apierrors.APIStatus)
	if !apierrors.IsInvalid(err) || !ok {
		t.Fatalf("invalid create: %v, want 422", err)
	}
	st := se.Status()
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != k.f.InvalidField {
		t.Errorf("422 causes %+v, want the first on %s", st.Details, k.f.InvalidField)
	}
	if want := fmt.Sprintf("%s %q is invalid", schemaKind(k.f.Resource), bad.GetName()); !strings.HasPrefix(st.Message, want) {
		t.Errorf("message %q, want it to start %q", st.Message, want)
	}
	// An invalid name: by default one no kind accepts, not a DNS name, nor
	// a ConfigMap key (which LeaseCandidates are named by), nor one path
	// segment (which is all core v1 Events and RBAC's kinds ask of a
	// name); a fixture names its own when its kind accepts more.
	invalidName := k.f.InvalidName
	if invalidName == "" {
		invalidName = "Not_A%Name"
	}
	badName := k.object(t, invalidName, nil)
	if _, err := k.client().Create(t.Context(), badName, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("create with an invalid name: %v, want 422", err)
	}
}

// schemaKind is how a 422 names the kind: Kind, or Kind.group.
func schemaKind(r resources.Resource) string {
	if g := r.Version.Group; g != "" {
		return r.Kind.Names.Kind + "." + g
	}
	return r.Kind.Names.Kind
}
