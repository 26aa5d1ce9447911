package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// Tests of single rules of SPEC-NOTES, each named for its rule.

// TestDeleteAnswersSuccessStatus: SPEC-NOTES §5.5. A delete that removes
// the object at once answers 200 with a Success Status whose details name
// the object, its group, its plural resource (in "kind") and its uid. A
// stale resourceVersion precondition is 409 with the text of
// apiserver/pkg/registry/rest/delete.go BeforeDelete, which names the Kind
// (not the resource) of the object.
func TestDeleteAnswersSuccessStatus(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	c := ts.Client(t)

	lease := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}))
	ep := must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}))

	for _, tc := range []struct {
		path    string
		details map[string]any
	}{
		{
			path:    "/apis/coordination.k8s.io/v1/namespaces/default/leases/gone",
			details: map[string]any{"name": "gone", "group": "coordination.k8s.io", "kind": "leases", "uid": string(lease.UID)},
		},
		{
			// The core group is "": omitted from the JSON.
			path:    "/api/v1/namespaces/default/endpoints/gone",
			details: map[string]any{"name": "gone", "kind": "endpoints", "uid": string(ep.UID)},
		},
	} {
		r := do(t, ts, "DELETE", tc.path, nil, "")
		if r.code != 200 {
			t.Fatalf("DELETE %s: %d, want 200: %s", tc.path, r.code, r.body)
		}
		st := r.status(t)
		if st["kind"] != "Status" || st["apiVersion"] != "v1" || st["status"] != "Success" {
			t.Errorf("DELETE %s: answer %s, want a Success Status", tc.path, r.body)
		}
		details, _ := st["details"].(map[string]any)
		if len(details) != len(tc.details) {
			t.Errorf("DELETE %s: details %v, want %v", tc.path, details, tc.details)
		}
		for k, v := range tc.details {
			if details[k] != v {
				t.Errorf("DELETE %s: details.%s = %v, want %v", tc.path, k, details[k], v)
			}
		}
	}
	if _, err := c.CoordinationV1().Leases("default").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease after delete: %v, want NotFound", err)
	}
	if _, err := c.CoreV1().Endpoints("default").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("endpoints after delete: %v, want NotFound", err)
	}

	// A stale resourceVersion precondition.
	l := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}))
	stale := l.ResourceVersion
	l.Spec.HolderIdentity = ptr("h")
	l = must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Update(ctx, l, metav1.UpdateOptions{}))
	r := do(t, ts, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/kept",
		map[string]string{"Content-Type": "application/json"},
		`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"`+stale+`"}}`)
	if r.code != 409 {
		t.Fatalf("stale precondition: %d, want 409: %s", r.code, r.body)
	}
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`Operation cannot be fulfilled on Lease.coordination.k8s.io "kept": the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified`, stale, l.ResourceVersion)
	if st.Reason != metav1.StatusReasonConflict || st.Code != 409 || st.Message != want {
		t.Errorf("stale precondition: %d %s %q, want 409 Conflict %q", st.Code, st.Reason, st.Message, want)
	}
	if st.Details == nil || st.Details.Name != "kept" || st.Details.Group != "coordination.k8s.io" || st.Details.Kind != "Lease" {
		t.Errorf("stale precondition: details %+v", st.Details)
	}
	if _, err := c.CoordinationV1().Leases("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("lease after a refused delete: %v", err)
	}
}

// TestPrettyJSONByUserAgent: SPEC-NOTES §9.1. Without ?pretty, JSON is
// indented by two spaces when the User-Agent starts with "curl", "Wget" or
// "Mozilla/5.0" (apiserver negotiation.isPrettyPrint), compact otherwise;
// an explicit pretty=false wins.
func TestPrettyJSONByUserAgent(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	must[*coordinationv1.Lease](t)(ts.Client(t).CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "pp"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h")},
	}, metav1.CreateOptions{}))
	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/pp"

	get := func(ua, query string) []byte {
		t.Helper()
		r := do(t, ts, "GET", path+query, map[string]string{"User-Agent": ua}, "")
		if r.code != 200 {
			t.Fatalf("GET with User-Agent %q: %d: %s", ua, r.code, r.body)
		}
		return bytes.TrimSuffix(r.body, []byte("\n"))
	}
	compact := get("kubectl/v1.36.0 (linux/amd64) kubernetes/abcdef", "")
	if !bytes.HasPrefix(compact, []byte(`{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"pp",`)) || bytes.Contains(compact, []byte("\n")) {
		t.Fatalf("kubectl User-Agent: body not compact JSON: %s", compact)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, compact, "", "  "); err != nil {
		t.Fatal(err)
	}
	for _, ua := range []string{"curl/8.5.0", "Wget/1.21.4", "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0"} {
		if got := get(ua, ""); !bytes.Equal(got, indented.Bytes()) {
			t.Errorf("User-Agent %q: body\n%s\nwant\n%s", ua, got, indented.Bytes())
		}
	}
	for _, tc := range []struct{ ua, query string }{
		{"Mozilla/4.0 (compatible)", ""},
		{"Go-http-client/1.1", ""},
		{"curl/8.5.0", "?pretty=false"},
	} {
		if got := get(tc.ua, tc.query); !bytes.Equal(got, compact) {
			t.Errorf("User-Agent %q%s: body\n%s\nwant compact\n%s", tc.ua, tc.query, got, compact)
		}
	}
}

// TestEndpointsNotTruncated: SPEC-NOTES §2.9. Truncation to 1000 addresses
// is the Endpoints controller's convention; the server stores and returns
// all 5000 addresses of one subset, without the over-capacity annotation.
func TestEndpointsNotTruncated(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	eps := ts.Client(t).CoreV1().Endpoints("default")
	const n = 5000
	addrs := make([]corev1.EndpointAddress, n)
	for i := range addrs {
		addrs[i].IP = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	in := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Subsets:    []corev1.EndpointSubset{{Addresses: addrs, Ports: []corev1.EndpointPort{{Port: 80}}}},
	}
	created := must[*corev1.Endpoints](t)(eps.Create(ctx, in, metav1.CreateOptions{}))
	got := must[*corev1.Endpoints](t)(eps.Get(ctx, "big", metav1.GetOptions{}))
	for what, e := range map[string]*corev1.Endpoints{"create answer": created, "get": got} {
		if len(e.Subsets) != 1 || len(e.Subsets[0].Addresses) != n {
			t.Fatalf("%s: %d subsets, addresses %d, want 1 subset of %d", what, len(e.Subsets), len(e.Subsets[0].Addresses), n)
		}
		for i, a := range e.Subsets[0].Addresses {
			if a.IP != addrs[i].IP {
				t.Fatalf("%s: address %d is %q, want %q", what, i, a.IP, addrs[i].IP)
			}
		}
		if v, ok := e.Annotations["endpoints.kubernetes.io/over-capacity"]; ok {
			t.Errorf("%s: over-capacity annotation %q set by the server", what, v)
		}
	}
}

// TestWatchYAMLNotAcceptable: SPEC-NOTES §7.4. YAML has no stream
// serializer, so a watch asking only for YAML is 406 with a Status listing
// the stream media types (apiserver NegotiateOutputMediaTypeStream). The
// Status itself is negotiated as for any error (responsewriters
// ErrorNegotiated), so it comes back in YAML.
func TestWatchYAMLNotAcceptable(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	for _, path := range []string{
		"/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=true&timeoutSeconds=5",
		"/api/v1/namespaces/default/endpoints?watch=true&timeoutSeconds=5",
		"/apis/coordination.k8s.io/v1/watch/namespaces/default/leases/x?timeoutSeconds=5",
	} {
		r := do(t, ts, "GET", path, map[string]string{"Accept": "application/yaml"}, "")
		if r.code != 406 {
			t.Fatalf("%s: %d, want 406: %s", path, r.code, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("%s: Content-Type %q, want application/yaml", path, ct)
		}
		var st metav1.Status
		if err := yaml.UnmarshalStrict(r.body, &st); err != nil {
			t.Fatalf("%s: body is not a YAML Status: %v: %s", path, err, r.body)
		}
		const msg = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
		if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Reason != metav1.StatusReasonNotAcceptable || st.Code != 406 || st.Message != msg {
			t.Errorf("%s: status %s, want 406 NotAcceptable %q", path, r.body, msg)
		}
	}
}

// TestCreateIgnoresUnparseableResourceVersion: SPEC-NOTES §4.3. A
// resourceVersion that does not parse as a number is ignored on create
// (the storage only refuses a parseable non-zero one: that 500 is checked
// by TestCreateIgnoresSystemFields).
func TestCreateIgnoresUnparseableResourceVersion(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	for _, tc := range []struct{ path, body string }{
		{"/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"neg","resourceVersion":"-1"}}`},
		{"/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"word","resourceVersion":"abc"}}`},
		{"/api/v1/namespaces/default/endpoints", `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"neg","resourceVersion":"-1"}}`},
	} {
		r := do(t, ts, "POST", tc.path, map[string]string{"Content-Type": "application/json"}, tc.body)
		if r.code != 201 {
			t.Fatalf("POST %s: %d, want 201: %s", tc.body, r.code, r.body)
		}
		var got metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		rv := got.ResourceVersion
		if rv == "" || rv == "-1" || rv == "abc" || strings.TrimLeft(rv, "0123456789") != "" || rv[0] == '0' {
			t.Errorf("POST %s: resourceVersion %q, want a fresh positive integer", tc.body, rv)
		}
	}
}

// TestImmortalNamespaces: SPEC-NOTES §3. NamespaceLifecycle refuses to
// delete default, kube-system and kube-public; kube-node-lease is an
// ordinary namespace and goes.
func TestImmortalNamespaces(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	nss := ts.Client(t).CoreV1().Namespaces()
	for _, name := range []string{"kube-system", "kube-public"} {
		se := wantStatus(t, nss.Delete(ctx, name, metav1.DeleteOptions{}), 403, metav1.StatusReasonForbidden)
		if want := `namespaces "` + name + `" is forbidden: this namespace may not be deleted`; se.ErrStatus.Message != want {
			t.Errorf("delete %s: message %q, want %q", name, se.ErrStatus.Message, want)
		}
		if d := se.ErrStatus.Details; d == nil || d.Name != name || d.Kind != "namespaces" || d.Group != "" {
			t.Errorf("delete %s: details %+v", name, d)
		}
		ns := must[*corev1.Namespace](t)(nss.Get(ctx, name, metav1.GetOptions{}))
		if ns.DeletionTimestamp != nil || ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("%s after a refused delete: deletionTimestamp %v, phase %s", name, ns.DeletionTimestamp, ns.Status.Phase)
		}
	}
	if err := nss.Delete(ctx, "kube-node-lease", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete kube-node-lease: %v", err)
	}
	waitFor(t, func() bool {
		_, err := nss.Get(ctx, "kube-node-lease", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestPutCreateNamespaceLifecycle: SPEC-NOTES §3. A PUT that creates counts
// as a create for NamespaceLifecycle: 404 on a missing namespace, 403 with
// a NamespaceTerminating cause in a terminating one (texts of apiserver
// admission/plugin/namespace/lifecycle). A PUT that updates is let through.
func TestPutCreateNamespaceLifecycle(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	c := ts.Client(t)

	_, err := c.CoordinationV1().Leases("nope").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "nope"}}, metav1.UpdateOptions{})
	se := wantStatus(t, err, 404, metav1.StatusReasonNotFound)
	if se.ErrStatus.Message != `namespaces "nope" not found` {
		t.Errorf("PUT in a missing namespace: message %q", se.ErrStatus.Message)
	}
	if d := se.ErrStatus.Details; d == nil || d.Name != "nope" || d.Kind != "namespaces" {
		t.Errorf("PUT in a missing namespace: details %+v", d)
	}

	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ending"}}, metav1.CreateOptions{}))
	leases := c.CoordinationV1().Leases("ending")
	held := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
	if err := c.CoreV1().Namespaces().Delete(ctx, "ending", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the namespace go: drop the finalizer if the test did not.
		// t.Context() is already done here.
		l, err := leases.Get(context.Background(), "held", metav1.GetOptions{})
		if err == nil && len(l.Finalizers) > 0 {
			l.Finalizers = nil
			_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		}
	})
	waitFor(t, func() bool {
		ns := must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Get(ctx, "ending", metav1.GetOptions{}))
		return ns.Status.Phase == corev1.NamespaceTerminating
	})

	_, err = leases.Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "ending"}}, metav1.UpdateOptions{})
	se = wantStatus(t, err, 403, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io "late" is forbidden: unable to create new content in namespace ending because it is being terminated`; se.ErrStatus.Message != want {
		t.Errorf("PUT in a terminating namespace: message %q, want %q", se.ErrStatus.Message, want)
	}
	wantCause := metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ending is being terminated", Field: "metadata.namespace"}
	if d := se.ErrStatus.Details; d == nil || len(d.Causes) != 1 || d.Causes[0] != wantCause {
		t.Errorf("PUT in a terminating namespace: details %+v, want one cause %+v", d, wantCause)
	}
	if _, err := leases.Get(ctx, "late", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease created in a terminating namespace: %v", err)
	}

	// Updates are never blocked: the finalizer can be removed, which lets
	// the namespace go.
	waitFor(t, func() bool {
		l, err := leases.Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held = l
		return held.DeletionTimestamp != nil
	})
	releaseNamespace(t, c, held)
}

// TestWatchListOptionsValidation: SPEC-NOTES §6.2 and §7.2. Invalid
// combinations of resourceVersionMatch, sendInitialEvents and continue are
// 422 on kind ListOptions, with apimachinery ValidateListOptions' texts.
func TestWatchListOptionsValidation(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	leases := ts.Client(t).CoordinationV1().Leases("default")
	for _, name := range []string{"a", "b"} {
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
	}
	page := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 1}))
	if page.Continue == "" {
		t.Fatal("no continue token on a page of 1 of 2")
	}
	cont := url.QueryEscape(page.Continue)

	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases?"
	const prefix = `ListOptions.meta.k8s.io "" is invalid: `
	for _, tc := range []struct {
		name, query string
		errs        []metav1.StatusCause
	}{
		{
			name:  "resourceVersionMatch on a watch without sendInitialEvents",
			query: "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=1",
			errs: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch",
				Message: "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"}},
		},
		{
			name:  "sendInitialEvents without resourceVersionMatch",
			query: "watch=true&sendInitialEvents=true",
			errs: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch",
				Message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"}},
		},
		{
			name:  "sendInitialEvents with resourceVersionMatch Exact",
			query: "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
			errs: []metav1.StatusCause{
				{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch", Message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
				{Type: metav1.CauseTypeFieldValueNotSupported, Field: "resourceVersionMatch", Message: `Unsupported value: "Exact": supported values: "NotOlderThan"`},
			},
		},
		{
			name:  "resourceVersionMatch with continue on a list",
			query: "resourceVersionMatch=NotOlderThan&resourceVersion=0&limit=1&continue=" + cont,
			errs: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch",
				Message: "Forbidden: resourceVersionMatch is forbidden when continue is provided"}},
		},
		{
			name:  "resourceVersionMatch with continue on a streaming watch",
			query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=" + cont,
			errs: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch",
				Message: "Forbidden: resourceVersionMatch is forbidden when continue is provided"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, ts, "GET", path+tc.query+"&timeoutSeconds=5", nil, "")
			if r.code != 422 {
				t.Fatalf("%d, want 422: %s", r.code, r.body)
			}
			var st metav1.Status
			if err := json.Unmarshal(r.body, &st); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, e := range tc.errs {
				parts = append(parts, e.Field+": "+e.Message)
			}
			want := prefix + parts[0]
			if len(parts) > 1 {
				want = prefix + "[" + strings.Join(parts, ", ") + "]"
			}
			if st.Status != metav1.StatusFailure || st.Reason != metav1.StatusReasonInvalid || st.Code != 422 || st.Message != want {
				t.Errorf("status %s %s %d %q, want Failure Invalid 422 %q", st.Status, st.Reason, st.Code, st.Message, want)
			}
			if d := st.Details; d == nil || d.Kind != "ListOptions" || d.Group != "meta.k8s.io" || d.Name != "" {
				t.Errorf("details %+v, want kind ListOptions, group meta.k8s.io", d)
			} else if fmt.Sprint(d.Causes) != fmt.Sprint(tc.errs) {
				t.Errorf("causes %+v, want %+v", d.Causes, tc.errs)
			}
		})
	}
}

// TestGenerateNameTruncatesPrefix: SPEC-NOTES §4.2. A generateName prefix
// longer than 58 characters is cut to 58 before the 5 random characters
// are appended, so the name is 63 characters long.
func TestGenerateNameTruncatesPrefix(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	c := ts.Client(t)
	prefix := strings.Repeat("p", 50) + "-abcdefghijklmnop-" // 68 characters
	check := func(what, name string) {
		t.Helper()
		if len(name) != 63 || name[:58] != prefix[:58] {
			t.Fatalf("%s: generated name %q (%d characters), want %q + 5 characters", what, name, len(name), prefix[:58])
		}
		if s := strings.Trim(name[58:], "bcdfghjklmnpqrstvwxz2456789"); s != "" {
			t.Errorf("%s: suffix %q has characters outside the generator's alphabet", what, name[58:])
		}
	}
	l := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{}))
	check("lease", l.Name)
	if l.GenerateName != prefix {
		t.Errorf("generateName stored as %q, want %q", l.GenerateName, prefix)
	}
	must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases("default").Get(ctx, l.Name, metav1.GetOptions{}))
	ep := must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{}))
	check("endpoints", ep.Name)
}

// TestWarningHeaders: SPEC-NOTES §2.5 E-W2 and §4.5. Non-canonical IPs in
// Endpoints (apimachinery GetWarningsForIP) and duplicate ownerReferences
// (apiserver handlers DuplicateOwnerReferencesWarningFormat) are accepted
// with one `Warning: 299 - "<text>"` header each.
func TestWarningHeaders(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	// The Endpoints deprecation warning (E-W1) is not what this test is
	// about: leasehold leaves it out.
	const deprecation = `299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"`
	warnings := func(r rawResponse) []string {
		var out []string
		for _, w := range r.header.Values("Warning") {
			if w != deprecation {
				out = append(out, w)
			}
		}
		return out
	}
	const subsets = `"subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"010.000.001.002"},{"ip":"::ffff:10.0.0.1"},{"ip":"2001:DB8:0:0::1"}],"notReadyAddresses":[{"ip":"fd00:0::1"}],"ports":[{"port":80}]}]`

	t.Run("endpoints IPs", func(t *testing.T) {
		r := do(t, ts, "POST", "/api/v1/namespaces/default/endpoints", map[string]string{"Content-Type": "application/json"},
			`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"odd"},`+subsets+`}`)
		if r.code != 201 {
			t.Fatalf("create: %d, want 201: %s", r.code, r.body)
		}
		want := []string{
			`299 - "subsets[0].addresses[1].ip: non-standard IP address \"010.000.001.002\" is invalid: use \"10.0.1.2\""`,
			`299 - "subsets[0].addresses[2].ip: non-standard IP address \"::ffff:10.0.0.1\" is invalid: use \"10.0.0.1\""`,
			`299 - "subsets[0].addresses[3].ip: IPv6 address \"2001:DB8:0:0::1\" should be in RFC 5952 canonical format (\"2001:db8::1\")"`,
			`299 - "subsets[0].notReadyAddresses[0].ip: IPv6 address \"fd00:0::1\" should be in RFC 5952 canonical format (\"fd00::1\")"`,
		}
		if got := warnings(r); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("Warning headers:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The IPs are stored as sent.
		var ep corev1.Endpoints
		if err := json.Unmarshal(r.body, &ep); err != nil {
			t.Fatal(err)
		}
		if ip := ep.Subsets[0].Addresses[1].IP; ip != "010.000.001.002" {
			t.Errorf("stored IP %q", ip)
		}

		// The Endpoints controller's objects are not warned about.
		r = do(t, ts, "POST", "/api/v1/namespaces/default/endpoints", map[string]string{"Content-Type": "application/json"},
			`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"ctrl","labels":{"endpoints.kubernetes.io/managed-by":"endpoint-controller"}},`+subsets+`}`)
		if r.code != 201 {
			t.Fatalf("create: %d, want 201: %s", r.code, r.body)
		}
		if got := warnings(r); len(got) != 0 {
			t.Errorf("Warning headers for the endpoint-controller's object: %q", got)
		}
	})

	t.Run("duplicate ownerReferences", func(t *testing.T) {
		const r1 = `{"apiVersion":"v1","kind":"Service","name":"svc","uid":"u1"}`
		const r2 = `{"apiVersion":"v1","kind":"Service","name":"other","uid":"u2"}`
		const prefix = `299 - ".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: `
		for _, tc := range []struct {
			name, refs, observed string
			kept                 int
		}{
			{"owned", r1 + "," + r1, "u1", 1},
			{"owned-twice", r1 + "," + r2 + "," + r1 + "," + r2, "u1, u2", 2},
		} {
			r := do(t, ts, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", map[string]string{"Content-Type": "application/json"},
				`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"`+tc.name+`","ownerReferences":[`+tc.refs+`]}}`)
			if r.code != 201 {
				t.Fatalf("create %s: %d, want 201: %s", tc.name, r.code, r.body)
			}
			want := prefix + tc.observed + `"`
			if got := warnings(r); len(got) != 1 || got[0] != want {
				t.Errorf("create %s: Warning headers:\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), want)
			}
			var l coordinationv1.Lease
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.OwnerReferences) != tc.kept {
				t.Errorf("create %s: ownerReferences %+v, want the duplicates dropped", tc.name, l.OwnerReferences)
			}
		}
		// A patch is checked once applied, which kube-apiserver words as
		// after mutating admission.
		r := do(t, ts, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/owned", map[string]string{"Content-Type": "application/merge-patch+json"},
			`{"metadata":{"ownerReferences":[`+r2+","+r2+`]}}`)
		want := `299 - ".metadata.ownerReferences contains duplicate entries after mutating admission happens; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: u2"`
		if got := warnings(r); r.code != 200 || len(got) != 1 || got[0] != want {
			t.Errorf("patch: %d, Warning headers:\n%s\nwant\n%s", r.code, strings.Join(got, "\n"), want)
		}
	})
}

// TestUpdateMalformedResourceVersion: a PUT whose metadata.resourceVersion
// is no number is the client's error, a 400 worded as a list's malformed
// resourceVersion (kube-apiserver answers 500 and logs it as its own
// fault: a deliberate difference), and changes nothing.
func TestUpdateMalformedResourceVersion(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	path := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	if r := do(t, ts, "POST", path, map[string]string{"Content-Type": "application/json"}, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"rv"}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	for _, rv := range []string{"abc", "-1", "1.5", "99999999999999999999"} {
		r := do(t, ts, "PUT", path+"/rv", map[string]string{"Content-Type": "application/json"},
			`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"rv","resourceVersion":"`+rv+`"},"spec":{"holderIdentity":"x"}}`)
		var st metav1.Status
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatal(err)
		}
		if r.code != 400 || st.Reason != metav1.StatusReasonBadRequest || !strings.HasPrefix(st.Message, `invalid resource version: resourceVersion: Invalid value: "`+rv+`": strconv.ParseUint: parsing "`+rv+`": `) {
			t.Errorf("PUT with resourceVersion %q: %d %s %q", rv, r.code, st.Reason, st.Message)
		}
	}
	r := do(t, ts, "GET", path+"/rv", nil, "")
	if strings.Contains(string(r.body), `"holderIdentity"`) {
		t.Errorf("a refused PUT changed the lease: %s", r.body)
	}
}
