package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func createLeases(t *testing.T, s *testserver.Server, ns string, n int, labels func(i int) map[string]string) {
	t.Helper()
	c := s.Client(t)
	for i := range n {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%03d", i)}}
		if labels != nil {
			l.Labels = labels(i)
		}
		if _, err := c.CoordinationV1().Leases(ns).Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListPaginationIsASnapshot(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.ProtoClient(t)
	createLeases(t, s, "default", 25, nil)
	leases := c.CoordinationV1().Leases("default")

	first := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 10}))
	if len(first.Items) != 10 || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 15 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(first.Items), first.Continue, first.RemainingItemCount)
	}
	// Changes after the first page never show up in later pages.
	if err := leases.Delete(ctx, "l020", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l999"}}, metav1.CreateOptions{}))
	names := []string{}
	for _, l := range first.Items {
		names = append(names, l.Name)
	}
	cont := first.Continue
	for cont != "" {
		page := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 10, Continue: cont}))
		if page.ResourceVersion != first.ResourceVersion {
			t.Fatalf("page at %s, first page at %s", page.ResourceVersion, first.ResourceVersion)
		}
		for _, l := range page.Items {
			names = append(names, l.Name)
		}
		cont = page.Continue
		if cont != "" && (page.RemainingItemCount == nil || *page.RemainingItemCount != int64(25-len(names))) {
			t.Errorf("after %d items: remainingItemCount %v", len(names), page.RemainingItemCount)
		}
	}
	if len(names) != 25 || names[20] != "l020" || names[24] != "l024" {
		t.Fatalf("paginated list is not the first page's snapshot: %v", names)
	}
	// A page's token carries the count of what is left, so that the next
	// page need not walk it; a token without one (kube-apiserver's, an
	// older leasehold's) or with one the snapshot cannot hold is counted.
	var tok map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(first.Continue)
	if err := json.Unmarshal(raw, &tok); err != nil || tok["left"] != 15.0 {
		t.Fatalf("first page's token %s: %v", raw, err)
	}
	for _, left := range []any{nil, 1} {
		tok["left"] = left
		if left == nil {
			delete(tok, "left")
		}
		raw, _ := json.Marshal(tok)
		page := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 10, Continue: base64.RawURLEncoding.EncodeToString(raw)}))
		if page.RemainingItemCount == nil || *page.RemainingItemCount != 5 {
			t.Errorf("second page from token %s: remainingItemCount %v, want 5", raw, page.RemainingItemCount)
		}
	}
	// A label selector narrows; remainingItemCount is only given without
	// selectors.
	createLeases(t, s, "sel", 0, nil)
	sel := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{LabelSelector: "missing", Limit: 5}))
	if len(sel.Items) != 0 || sel.RemainingItemCount != nil || sel.Continue != "" {
		t.Errorf("selected list: %+v", sel.ListMeta)
	}
}

func TestListResourceVersionRules(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	leases := s.Client(t).CoordinationV1().Leases("default")
	createLeases(t, s, "default", 3, nil)
	list := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
	rv := list.ResourceVersion
	later := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}))

	// Exact reads the past; NotOlderThan and "" read the present.
	exact := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}))
	if len(exact.Items) != 3 || exact.ResourceVersion != rv {
		t.Errorf("Exact: %d items at %s", len(exact.Items), exact.ResourceVersion)
	}
	// NotOlderThan a revision includes everything up to it (and maybe
	// more: the cache may be ahead, never behind).
	now := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{ResourceVersion: later.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}))
	if len(now.Items) != 4 {
		t.Errorf("NotOlderThan %s: %d items", later.ResourceVersion, len(now.Items))
	}
	if mustAtoi(t, now.ResourceVersion) < mustAtoi(t, later.ResourceVersion) {
		t.Errorf("NotOlderThan %s answered at %s", later.ResourceVersion, now.ResourceVersion)
	}
	// Invalid combinations are 422 on ListOptions; bad values 400.
	for _, opts := range []metav1.ListOptions{
		{ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: "1", ResourceVersionMatch: "Newest"},
		{SendInitialEvents: ptr(true)},
	} {
		_, err := leases.List(ctx, opts)
		se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
		if se.ErrStatus.Details.Kind != "ListOptions" {
			t.Errorf("%+v: details %+v", opts, se.ErrStatus.Details)
		}
	}
	for _, opts := range []metav1.ListOptions{
		{ResourceVersion: "abc"},
		{Continue: "not-a-token"},
		{LabelSelector: "a in (b"},
		{FieldSelector: "spec.holderIdentity=x"},
	} {
		_, err := leases.List(ctx, opts)
		wantStatus(t, err, 400, metav1.StatusReasonBadRequest)
	}
	_, err := leases.List(ctx, metav1.ListOptions{FieldSelector: "spec.holderIdentity=x"})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); se.ErrStatus.Message != `"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"` {
		t.Errorf("message %q", se.ErrStatus.Message)
	}
	// A future resourceVersion waits, then answers 504 Too large (with
	// Retry-After, so client-go would retry: ask once).
	future := strconv.Itoa(1 << 40)
	err = s.Client(t).CoordinationV1().RESTClient().Get().Namespace("default").Resource("leases").Name("later").
		Param("resourceVersion", future).MaxRetries(0).Do(ctx).Error()
	se := wantStatus(t, err, 504, metav1.StatusReasonTimeout)
	if len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Errorf("causes %+v", se.ErrStatus.Details.Causes)
	}
}

func TestSelectors(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.Client(t)
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}))
	createLeases(t, s, "default", 6, func(i int) map[string]string {
		return map[string]string{"tier": []string{"a", "b", "c"}[i%3], "n": strconv.Itoa(i)}
	})
	createLeases(t, s, "other", 2, func(int) map[string]string { return map[string]string{"tier": "a"} })
	all := c.CoordinationV1().Leases("")
	for sel, want := range map[[2]string]int{
		{"tier=a", ""}:                    4,
		{"tier==a", ""}:                   4,
		{"tier!=a", ""}:                   4,
		{"tier in (a,b)", ""}:             6,
		{"tier notin (a,b)", ""}:          2,
		{"n", ""}:                         6,
		{"!n", ""}:                        2,
		{"tier=a,n", ""}:                  2,
		{"", "metadata.namespace=other"}:  2,
		{"", "metadata.namespace!=other"}: 6,
		{"", "metadata.name=l001"}:        2,
		{"tier=a", "metadata.name==l000"}: 2,
		{"", "metadata.name=l001,metadata.namespace=default"}: 1,
	} {
		l := must[*coordinationv1.LeaseList](t)(all.List(ctx, metav1.ListOptions{LabelSelector: sel[0], FieldSelector: sel[1]}))
		if len(l.Items) != want {
			t.Errorf("label %q field %q: %d items, want %d", sel[0], sel[1], len(l.Items), want)
		}
	}
	nss := must[*corev1.NamespaceList](t)(c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name=other"}))
	if len(nss.Items) != 1 {
		t.Errorf("namespaces by phase and name: %d", len(nss.Items))
	}
	_, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=x"})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); se.ErrStatus.Message != "field label not supported: metadata.namespace" {
		t.Errorf("message %q", se.ErrStatus.Message)
	}
}

// TestListContinueExpired: a continue token whose snapshot is gone (out of
// the window of retained list snapshots and of the event window) answers
// 410 Expired with kube-apiserver's message and a new token that goes on
// from the next key at the latest revision; an Exact list at that
// revision, or the legacy "resourceVersion=N with limit" form, answers 410
// "too old". A token with a resourceVersion is a 400.
func TestListContinueExpired(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *server.Config) { c.WatchWindow = 8 })
	ctx := t.Context()
	leases := s.Client(t).CoordinationV1().Leases("default")
	createLeases(t, s, "default", 10, nil)
	first := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 3}))
	if first.Continue == "" {
		t.Fatal("no continue token")
	}

	_, err := leases.List(ctx, metav1.ListOptions{Limit: 3, Continue: first.Continue, ResourceVersion: first.ResourceVersion})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); se.ErrStatus.Message != "specifying resource version is not allowed when using continue" {
		t.Errorf("continue with a resourceVersion: %q", se.ErrStatus.Message)
	}
	_, err = leases.List(ctx, metav1.ListOptions{Limit: 3, Continue: "not-a-token"})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); !strings.HasPrefix(se.ErrStatus.Message, "invalid continue token: ") {
		t.Errorf("undecodable token: %q", se.ErrStatus.Message)
	}
	_, err = leases.List(ctx, metav1.ListOptions{ResourceVersion: "abc"})
	if se := wantStatus(t, err, 400, metav1.StatusReasonBadRequest); !strings.HasPrefix(se.ErrStatus.Message, "invalid resource version") {
		t.Errorf("non-numeric resourceVersion: %q", se.ErrStatus.Message)
	}

	// Push the first page's snapshot out: each paginated list at a new
	// revision retains its own, and the writes leave the event window.
	churn := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "zz-churn"}}, metav1.CreateOptions{}))
	for i := range 80 {
		churn.Spec.LeaseTransitions = ptr(int32(i))
		churn = must[*coordinationv1.Lease](t)(leases.Update(ctx, churn, metav1.UpdateOptions{}))
		must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 3}))
	}

	_, err = leases.List(ctx, metav1.ListOptions{Limit: 3, Continue: first.Continue})
	se := wantStatus(t, err, 410, metav1.StatusReasonExpired)
	const expired = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
	if se.ErrStatus.Message != expired || se.ErrStatus.Continue == "" {
		t.Fatalf("expired token: message %q, continue %q", se.ErrStatus.Message, se.ErrStatus.Continue)
	}
	// The new token goes on after the first page, at the latest revision.
	next := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{Limit: 3, Continue: se.ErrStatus.Continue}))
	if len(next.Items) != 3 || next.Items[0].Name != "l003" || mustAtoi(t, next.ResourceVersion) < mustAtoi(t, churn.ResourceVersion) {
		t.Errorf("after the expired token: %d items from %v at %s, want l003... at %s or later", len(next.Items), names(next.Items), next.ResourceVersion, churn.ResourceVersion)
	}

	const tooOld = "The resourceVersion for the provided list is too old."
	for _, opts := range []metav1.ListOptions{
		{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: first.ResourceVersion, Limit: 3}, // legacy: N with a limit is Exact
	} {
		_, err := leases.List(ctx, opts)
		if se := wantStatus(t, err, 410, metav1.StatusReasonExpired); se.ErrStatus.Message != tooOld {
			t.Errorf("%+v: %q, want %q", opts, se.ErrStatus.Message, tooOld)
		}
	}
}

func names(items []coordinationv1.Lease) []string {
	var out []string
	for _, l := range items {
		out = append(out, l.Name)
	}
	return out
}

// TestContinueCannotLeaveTheNamespace: a continue token is the client's
// to forge; one whose key lies past the list's namespace lists nothing of
// the namespaces after it.
func TestContinueCannotLeaveTheNamespace(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	c := s.ProtoClient(t)
	for _, ns := range []string{"a", "b", "zz"} { // b: the first object past a is not where the token starts
		must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
		createLeases(t, s, ns, 2, nil)
	}
	first := must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases("a").List(ctx, metav1.ListOptions{Limit: 1}))
	raw, _ := base64.RawURLEncoding.DecodeString(first.Continue)
	var tok map[string]any
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatal(err)
	}
	tok["start"] = "zz/l000"
	delete(tok, "left")
	forged, _ := json.Marshal(tok)
	page, err := c.CoordinationV1().Leases("a").List(ctx, metav1.ListOptions{Limit: 10, Continue: base64.RawURLEncoding.EncodeToString(forged)})
	if err == nil && len(page.Items) > 0 {
		t.Fatalf("a list of namespace a continued into %s/%s", page.Items[0].Namespace, page.Items[0].Name)
	}
}
