// Package browser drives leasehold's web view (/ui/) in a real headless
// Chromium through the DevTools protocol (github.com/chromedp/chromedp),
// against a real server: the page must show a lease, follow a change made
// with client-go without a reload, and show 401 and 403 answers.
//
// It needs Debian's chromium package (CI installs it); without a browser
// it skips, saying so. LEASEHOLD_UI_SCREENSHOT=FILE writes a screenshot of
// the page (the manual's picture, docs/ui.png, shown in docs/metrics.md).
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/resources/lease"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const tokens = `viewer-token,vera,uid-vera,viewers
nobody-token,nobody,uid-nobody
`

// policy lets the viewers group read leases and endpoints; nobody gets
// nothing.
const policy = `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"viewers","namespace":"*","resource":"*","apiGroup":"*","readonly":true}}
`

// browser returns a headless Chromium context, or skips the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium to drive: install Debian's chromium package (apt-get install chromium) to run the web view's browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1200, 640),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("Chromium at %s does not start here: %v", path, err)
	}
	return ctx
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestWebView(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tokens.csv"), tokens)
	write(t, filepath.Join(dir, "policy.jsonl"), policy)
	s := testserver.Start(t, func(c *server.Config) {
		c.TokenAuthFile = filepath.Join(dir, "tokens.csv")
		c.AuthorizationPolicyFile = filepath.Join(dir, "policy.jsonl")
	})
	c := s.Client(t)
	ctx := t.Context()
	ns := "web"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	lease, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-a"), LeaseDurationSeconds: ptr[int32](15),
			RenewTime: &now, AcquireTime: &now, LeaseTransitions: ptr[int32](3)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An expired lease with coordinated leader election fields.
	old := metav1.NewMicroTime(time.Now().Add(-42 * time.Second))
	strategy := coordinationv1.OldestEmulationVersion
	if _, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "controller"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-c"), LeaseDurationSeconds: ptr[int32](10),
			RenewTime: &old, LeaseTransitions: ptr[int32](1), Strategy: &strategy, PreferredHolder: ptr("node-d")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What client-go's release() leaves, an hour ago, and a held lease
	// without a term: released, and expired (lease.Term).
	hourAgo := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	for name, spec := range map[string]coordinationv1.LeaseSpec{
		"released": {HolderIdentity: ptr(""), LeaseDurationSeconds: ptr[int32](1), RenewTime: &hourAgo, AcquireTime: &hourAgo},
		"noterm":   {HolderIdentity: ptr("node-e"), LeaseDurationSeconds: ptr[int32](10)},
	} {
		if _, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	row := fmt.Sprintf(`#leases tr[data-key="%s/scheduler"]`, ns)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(rctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		v, err := chromedp.Run(rctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return v
	}
	eval := func(expr string) bool {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		v, err := chromedp.Run(rctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}

	// The page shows the lease and the endpoints.
	do("open the page with a token in the fragment",
		chromedp.Navigate(s.URL()+"/ui/#token=viewer-token"),
		chromedp.WaitVisible(row),
		chromedp.WaitVisible(`#endpoints tr[data-key="web/api"]`),
	)
	holder, addresses := text(row+" td.holder"), text(`#endpoints tr[data-key="web/api"] td.addresses`)
	if holder != "node-a" || addresses != "10.0.0.1, 10.0.0.2" {
		t.Fatalf("the page shows holder %q, addresses %q", holder, addresses)
	}
	if location, err := chromedp.Run(bctx, chromedp.Location()); err != nil || strings.Contains(location, "token") {
		t.Errorf("the token stays in the address bar: %s (%v)", location, err)
	}

	// A change made with client-go shows within a second, without a
	// reload: the page's own marker survives.
	eval(`window.sameDocument = true`)
	renew := metav1.NowMicro()
	lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.LeaseTransitions = ptr("node-b"), &renew, ptr[int32](4)
	if _, err := c.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	wctx, cancel := context.WithTimeout(bctx, time.Second)
	_, err = chromedp.Run(wctx, chromedp.Poll[bool](
		fmt.Sprintf(`document.querySelector('%s td.holder')?.textContent === 'node-b'`, row),
		chromedp.WithPollingInterval(20*time.Millisecond)))
	cancel()
	if err != nil {
		t.Fatalf("the new holder did not show within a second of the update: %v", err)
	}
	t.Logf("the change showed %v after the update returned", time.Since(updated).Round(time.Millisecond))
	if !eval(`window.sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	if tr := text(row + " td.transitions"); tr != "4" {
		t.Errorf("transitions %q, want 4", tr)
	}
	if until := text(`#leases tr[data-key="web/controller"] td.until`); !strings.HasPrefix(until, "expired") {
		t.Errorf("the expired lease shows %q until expiry", until)
	}

	checkExpiry(t, bctx, c.CoordinationV1().RESTClient(), ns)

	if path := os.Getenv("LEASEHOLD_UI_SCREENSHOT"); path != "" {
		do("let the countdown tick", chromedp.Sleep(1100*time.Millisecond))
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Refusals show on the page.
	for _, tc := range []struct{ token, want string }{
		{"nobody-token", "403 Forbidden"},
		{"wrong-token", "401 Unauthorized"},
	} {
		do("open the page with "+tc.token,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(s.URL()+"/ui/#token="+tc.token),
			chromedp.WaitVisible(`#error-leases`),
		)
		if msg := text(`#error-leases`); !strings.Contains(msg, tc.want) {
			t.Errorf("with %s the page says %q, want %q", tc.token, msg, tc.want)
		}
	}
}

// checkExpiry holds the page to leasehold's one definition of an expired
// lease (lease.Term): the page's leaseExpired against Go's lease.Expired
// on the edge cases, and each lease row's "Until expiry" cell against the
// Expired column of the server's table (kubectl get -o wide).
func checkExpiry(t *testing.T, bctx context.Context, rc rest.Interface, ns string) {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: now.Add(d)} }
	for _, spec := range []coordinationv1.LeaseSpec{
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: at(-14 * time.Second)},
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: at(-15 * time.Second)},
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: at(-15*time.Second + time.Millisecond)},
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: at(time.Minute)},
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](0), RenewTime: at(0)},
		{HolderIdentity: ptr("a"), RenewTime: at(-time.Hour)},
		{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15)},
		{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr[int32](1), RenewTime: at(-time.Hour)},
		{LeaseDurationSeconds: ptr[int32](15), RenewTime: at(-time.Hour)},
		{},
	} {
		js, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		got, err := chromedp.Run(rctx, chromedp.Evaluate[bool](fmt.Sprintf("leaseExpired(%s, %d)", js, now.UnixMilli())))
		cancel()
		if err != nil {
			t.Fatalf("leaseExpired(%s): %v", js, err)
		}
		if want := lease.Expired(&spec, now); got != want {
			t.Errorf("the page's leaseExpired(%s) = %t, lease.Expired = %t", js, got, want)
		}
	}

	raw, err := rc.Get().Namespace(ns).Resource("leases").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(t.Context()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	col := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Expired" })
	if col < 0 || len(table.Rows) < 4 {
		t.Fatalf("table: Expired column %d, %d rows", col, len(table.Rows))
	}
	want := map[string]string{"released": "released", "noterm": "expired"}
	for _, r := range table.Rows {
		name := r.Cells[0].(string)
		sel := fmt.Sprintf(`#leases tr[data-key="%s/%s"] td.until`, ns, name)
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		shown, err := chromedp.Run(rctx, chromedp.Evaluate[[]string](
			fmt.Sprintf(`(() => { const td = document.querySelector('%s'); return [td.textContent, String(td.classList.contains('expired'))]; })()`, sel)))
		cancel()
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		if shown[1] != r.Cells[col] {
			t.Errorf("lease %s: the page shows %q (expired %s), the table's Expired column %v", name, shown[0], shown[1], r.Cells[col])
		}
		if w, ok := want[name]; ok && !strings.HasPrefix(shown[0], w) {
			t.Errorf("lease %s: the page shows %q until expiry, want %s", name, shown[0], w)
		}
	}
}
