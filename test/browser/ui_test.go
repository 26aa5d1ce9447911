// Package browser drives leasehold's web view (/ui/) in a real headless
// Chromium through the DevTools protocol (github.com/chromedp/chromedp),
// against a real server: the page must show a lease, follow a change made
// with client-go without a reload and show it in the lease's history, show
// 401 and 403 answers (a 403 in place of the "Following" line), work with
// the viewer role docs/metrics.md documents, and judge countdowns by the
// server's clock when the browser's is off.
//
// It needs Debian's chromium package (CI installs it); without a browser
// it skips, saying so. LEASEHOLD_UI_SCREENSHOT=FILE writes a screenshot of
// the page (the manual's picture, docs/ui.png, shown in docs/metrics.md).
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

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
		chromedp.WindowSize(1400, 720),
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

	// The holder change shows in the lease's history, after the holder
	// before it, without a reload.
	hctx, cancel := context.WithTimeout(bctx, 10*time.Second)
	_, err = chromedp.Run(hctx, chromedp.Poll[bool](
		fmt.Sprintf(`/^node-a \d+s → .*node-b \d+s$/.test(document.querySelector('%s td.history')?.textContent ?? '')`, row),
		chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		t.Fatalf("the history did not show node-a then node-b: it shows %q: %v", text(row+" td.history"), err)
	}
	flap(t, c, ns)
	hctx, cancel = context.WithTimeout(bctx, 10*time.Second)
	_, err = chromedp.Run(hctx, chromedp.Poll[bool](
		`document.querySelector('#leases tr[data-key="web/flappy"] td.history.flapping')?.textContent.includes('(gap 14s)')`,
		chromedp.WithPollingInterval(50*time.Millisecond)))
	cancel()
	if err != nil {
		t.Fatalf("the flapping lease's history shows %q: %v", text(`#leases tr[data-key="web/flappy"] td.history`), err)
	}
	if !eval(`window.sameDocument === true`) {
		t.Fatal("the page was reloaded")
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

// flap makes a lease change holder three times within a minute, with a
// gap of 14 s without renewals before the last.
func flap(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	now := time.Now()
	at := func(d time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: now.Add(d)} }
	l, err := c.CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "flappy"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](10),
			AcquireTime: at(-3 * time.Minute), RenewTime: at(-70 * time.Second), LeaseTransitions: ptr[int32](0)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		holder         string
		acquire, renew time.Duration
	}{
		{"bob", -60 * time.Second, -40 * time.Second},
		{"carol", -26 * time.Second, -2 * time.Second},
	} {
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = ptr(step.holder), at(step.acquire), at(step.acquire), ptr(int32(i+1))
		if l, err = c.CoordinationV1().Leases(ns).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = at(step.renew)
		if l, err = c.CoordinationV1().Leases(ns).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
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

// TestWebViewPermissions: with RBAC, a token user without rights sees the
// server's 403 in place of "Following …"; bound to the role the manual
// documents (docs/metrics.md, applied as written there), the same user
// sees the leases and their history.
func TestWebViewPermissions(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tokens.csv"), tokens)
	s := testserver.Start(t, func(c *server.Config) { c.TokenAuthFile = filepath.Join(dir, "tokens.csv") })
	c := s.Client(t)
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	if _, err := c.CoordinationV1().Leases("web").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("node-a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: &now, AcquireTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		v, err := chromedp.Run(rctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	open := func(what, waitFor string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(rctx, chromedp.Navigate("about:blank"), chromedp.Navigate(s.URL()+"/ui/#token=viewer-token"), chromedp.WaitVisible(waitFor)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Without rights: the status line says so, with the server's message.
	open("open the page without rights", `#status.failed`)
	status := run("read the status", chromedp.Text(`#status`))
	if !strings.Contains(status, "403 Forbidden") || !strings.Contains(status, `User "vera" cannot watch resource "leases"`) || strings.Contains(status, "Following") {
		t.Errorf("without rights the status says %q", status)
	}

	role, binding := documentedViewerRole(t)
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer reads its cache, a moment behind the write.
	vera := kubernetes.NewForConfigOrDie(&rest.Config{Host: s.Config.Host, TLSClientConfig: s.Config.TLSClientConfig, BearerToken: "viewer-token"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := vera.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("vera still cannot list leases: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	open("open the page with the documented role", `#leases tr[data-key="web/scheduler"] td.history .tenure`)
	if status := run("read the status", chromedp.Text(`#status`)); status != "Following all namespaces; changes show as they happen." {
		t.Errorf("with the documented role the status says %q", status)
	}
	if h := run("read the history", chromedp.Text(`#leases tr[data-key="web/scheduler"] td.history`)); !strings.HasPrefix(h, "node-a ") {
		t.Errorf("the history shows %q", h)
	}
}

// documentedViewerRole returns the ClusterRole and binding of the live
// view's steps in docs/metrics.md.
func documentedViewerRole(t *testing.T) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)kubectl apply -f - <<'EOF'\n(.*?)\nEOF\nkubectl create clusterrolebinding (\S+) --clusterrole=(\S+) --group=(\S+)\n`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/metrics.md has no viewer role and binding to apply")
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(m[1], &role); err != nil {
		t.Fatal(err)
	}
	return &role, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: string(m[2])},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: string(m[3])},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: string(m[4])}},
	}
}

// TestWebViewClock: with the browser's clock 7.3 s ahead of the server's,
// the page estimates the offset to within 250 ms (the Date header, in
// whole seconds, could be a second off), a lease renewed just now for 15 s
// shows at most 15s until expiry, and a countdown never shows more than
// the lease's duration nor the absolute value of a passed end.
func TestWebViewClock(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tokens.csv"), tokens)
	write(t, filepath.Join(dir, "policy.jsonl"), policy)
	s := testserver.Start(t, func(c *server.Config) {
		c.TokenAuthFile = filepath.Join(dir, "tokens.csv")
		c.AuthorizationPolicyFile = filepath.Join(dir, "policy.jsonl")
	})
	c := s.Client(t)
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	if _, err := c.CoordinationV1().Leases("web").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("node-a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Call(rctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `{ const real = Date.now; Date.now = () => real() + 7300; }`,
	}); err != nil {
		t.Fatal(err)
	}
	row := `#leases tr[data-key="web/scheduler"]`
	if err := chromedp.Do(rctx, chromedp.Navigate(s.URL()+"/ui/#token=viewer-token"), chromedp.WaitVisible(row)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(rctx, chromedp.Poll[bool](`clock.samples.length >= 5`)); err != nil {
		t.Fatal(err)
	}
	offset, err := chromedp.Run(rctx, chromedp.Evaluate[float64](`clock.offset`))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(offset+7300) > 250 {
		t.Errorf("the page's clock offset is %.0f ms, want -7300 ± 250", offset)
	}
	until, err := chromedp.Run(rctx, chromedp.Text(row+" td.until"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains([]string{"15s", "14s", "13s", "12s"}, until) {
		t.Errorf("a lease renewed just now for 15 s shows %q until expiry", until)
	}
	for expr, want := range map[string]string{
		`countdown({ held: true, end: 100000 + 16000 }, 15000, 100000)`: `{"expired":false,"text":"15s"}`,
		`countdown({ held: true, end: 100000 + 15600 }, 15000, 100000)`: `{"expired":false,"text":"15s"}`,
		`countdown({ held: true, end: 100000 + 400 }, 15000, 100000)`:   `{"expired":false,"text":"0s"}`,
		`countdown({ held: true, end: 100000 - 3000 }, 15000, 100000)`:  `{"expired":true,"text":"expired 3s ago"}`,
		`duration(-1500)`: `"0s"`,
	} {
		got, err := chromedp.Run(rctx, chromedp.Evaluate[string](`JSON.stringify(`+expr+`)`))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
}
