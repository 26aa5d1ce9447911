package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// metricsPolicy adds to testPolicy a rule for the monitoring group:
// /metrics, as kube-apiserver's system:monitoring role grants it.
const metricsPolicy = testPolicy + `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"monitoring","nonResourcePath":"/metrics","readonly":true}}
`

// scrape gets /metrics with cfg's credentials.
func scrape(t testing.TB, s *secureServer, cfg *rest.Config) (int, []byte) {
	t.Helper()
	r := doAs(t, cfg, s.URL(), http.MethodGet, "/metrics", nil, nil)
	return r.code, r.body
}

func parseMetrics(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of name with labels (a subset),
// and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
		return 0, true
	}
	return 0, false
}

func TestMetricsAuthorization(t *testing.T) {
	s := startSecure(t, metricsPolicy)
	writeTestFile(t, s.tokenFile, testTokens+"prom-token,prometheus,uid-prom,monitoring\n")
	prom := s.tokenConfig("prom-token")
	waitFor(t, func() bool { code, _ := scrape(t, s, prom); return code != http.StatusUnauthorized })
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		want int
	}{
		{"system:masters", s.Config, http.StatusOK},
		{"a rule for /metrics", prom, http.StatusOK},
		{"no rule", s.tokenConfig("bob-token"), http.StatusForbidden},
		{"anonymous", s.anonymousConfig(), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := scrape(t, s, tc.cfg); code != tc.want {
				t.Fatalf("GET /metrics: %d, want %d\n%.300s", code, tc.want, body)
			}
		})
	}
}

// TestMetricsRBAC: with RBAC (the default mode), the system:monitoring
// group may scrape /metrics through kube-apiserver's bootstrap
// system:monitoring ClusterRole and binding; other users may not.
func TestMetricsRBAC(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	writeTestFile(t, s.tokenFile, testTokens+"prom-token,prometheus,uid-prom,system:monitoring\n")
	prom := s.tokenConfig("prom-token")
	waitFor(t, func() bool { code, _ := scrape(t, s, prom); return code != http.StatusUnauthorized })
	if code, body := scrape(t, s, prom); code != http.StatusOK || !bytes.Contains(body, []byte("apiserver_request_total")) {
		t.Errorf("system:monitoring: GET /metrics: %d\n%.300s", code, body)
	}
	code, body := scrape(t, s, s.tokenConfig("bob-token"))
	if want := `forbidden: User \"bob\" cannot get path \"/metrics\"`; code != http.StatusForbidden || !bytes.Contains(body, []byte(want)) {
		t.Errorf("bob: GET /metrics: %d, want 403 %s\n%.300s", code, want, body)
	}
}

func TestMetrics(t *testing.T) {
	s := startSecure(t, "")
	c := s.Client(t)
	ctx := t.Context()
	ns := "metrics-test"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	leases := c.CoordinationV1().Leases(ns)
	now := metav1.NowMicro()
	// A lease of one second that nobody renews.
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "stale"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("gone"), LeaseDurationSeconds: ptr[int32](1), RenewTime: &now},
	}, metav1.CreateOptions{}))
	// Released as client-go's release() leaves it, its second long gone:
	// not expired. Held without a duration: no term, expired (lease.Term).
	hourAgo := metav1.NewMicroTime(now.Add(-time.Hour))
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "released"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr[int32](1), RenewTime: &hourAgo},
	}, metav1.CreateOptions{}))
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "noterm"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("c"), RenewTime: &now},
	}, metav1.CreateOptions{}))
	// A lease that is renewed, then taken by another holder.
	l := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](3600), RenewTime: &now, LeaseTransitions: ptr[int32](0)},
	}, metav1.CreateOptions{}))
	for i, holder := range []string{"a", "a", "b"} {
		renew := metav1.NewMicroTime(now.Add(time.Duration(i+1) * time.Second))
		l.Spec.RenewTime, l.Spec.HolderIdentity = &renew, ptr(holder)
		l = must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{}))
	}
	// An open watch, for the long-running and watcher gauges.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := must[watch.Interface](t)(leases.Watch(wctx, metav1.ListOptions{}))
	defer w.Stop()

	var fams map[string]*dto.MetricFamily
	var body []byte
	waitFor(t, func() bool {
		var code int
		code, body = scrape(t, s, s.Config)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d\n%.300s", code, body)
		}
		fams = parseMetrics(t, body)
		expired, _ := value(fams, "leasehold_leases_expired", map[string]string{"namespace": ns})
		changes, _ := value(fams, "leasehold_lease_holder_changes_total", map[string]string{"namespace": ns})
		watchers, _ := value(fams, "apiserver_registered_watchers", map[string]string{"kind": "Lease"})
		return expired == 2 && changes == 1 && watchers >= 1
	})
	checkExposition(t, body)

	want := map[string][]string{
		"apiserver_request_total":                  {"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"},
		"apiserver_request_duration_seconds":       {"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"},
		"apiserver_current_inflight_requests":      {"request_kind"},
		"apiserver_longrunning_requests":           {"verb", "group", "version", "resource", "subresource", "scope", "component"},
		"apiserver_watch_events_total":             {"group", "version", "kind"},
		"apiserver_registered_watchers":            {"group", "version", "kind"},
		"apiserver_storage_objects":                {"resource"},
		"apiserver_storage_size_bytes":             {"storage_cluster_id"},
		"go_goroutines":                            nil,
		"process_cpu_seconds_total":                nil,
		"leasehold_leases_held":                    {"namespace"},
		"leasehold_leases_expired":                 {"namespace"},
		"leasehold_lease_renewals_total":           {"namespace"},
		"leasehold_lease_holder_changes_total":     {"namespace"},
		"leasehold_lease_oldest_unrenewed_seconds": {"namespace"},
		"leasehold_lease_info":                     {"namespace", "name", "holder", "strategy", "preferred_holder"},
		"leasehold_lease_expired":                  {"namespace", "name"},
		"leasehold_lease_series_omitted":           nil,
	}
	if os.Getenv(testserver.StorageEnv) == "etcd" {
		want["etcd_request_duration_seconds"] = []string{"operation", "group", "resource"}
	} else {
		want["leasehold_storage_commit_duration_seconds"] = nil
		want["leasehold_storage_commit_batch_writes"] = nil
		want["leasehold_storage_data_bytes"] = nil
	}
	for name, labels := range want {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		var got []string
		for _, l := range f.Metric[0].Label {
			got = append(got, l.GetName())
		}
		slices.Sort(got)
		labels = slices.Sorted(slices.Values(labels))
		if !slices.Equal(got, labels) {
			t.Errorf("%s has labels %v, want %v", name, got, labels)
		}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leasehold_leases_held", map[string]string{"namespace": ns}, 3},
		{"leasehold_leases_expired", map[string]string{"namespace": ns}, 2},
		{"leasehold_lease_renewals_total", map[string]string{"namespace": ns}, 2},
		{"leasehold_lease_holder_changes_total", map[string]string{"namespace": ns}, 1},
		{"leasehold_lease_expired", map[string]string{"namespace": ns, "name": "stale"}, 1},
		{"leasehold_lease_expired", map[string]string{"namespace": ns, "name": "leader"}, 0},
		{"leasehold_lease_expired", map[string]string{"namespace": ns, "name": "released"}, 0},
		{"leasehold_lease_expired", map[string]string{"namespace": ns, "name": "noterm"}, 1},
		{"leasehold_lease_info", map[string]string{"namespace": ns, "name": "leader", "holder": "b"}, 1},
		{"apiserver_storage_objects", map[string]string{"resource": "leases.coordination.k8s.io"}, 4},
		{"apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": "leases", "scope": "namespace"}, 1},
		{"apiserver_request_total", map[string]string{"verb": "PUT", "resource": "leases", "scope": "resource", "code": "200"}, 3},
		{"apiserver_request_total", map[string]string{"verb": "POST", "resource": "leases", "scope": "resource", "code": "201"}, 4},
	} {
		if got, ok := value(fams, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present: %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
}

// checkExposition runs promtool check metrics on body, as Prometheus's
// own linter; without promtool (CI installs Debian's prometheus package),
// the same rules from client_golang's promlint.
func checkExposition(t *testing.T, body []byte) {
	t.Helper()
	if path, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
		return
	}
	t.Log("promtool is not installed (Debian package prometheus); linting with client_golang's promlint")
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Metric+": "+p.Text)
	}
	if len(msgs) > 0 {
		t.Errorf("promlint:\n%s", strings.Join(msgs, "\n"))
	}
}
