package httpserver

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
)

// requestMetrics are kube-apiserver's request metrics, with its names,
// labels and buckets (apiserver/pkg/endpoints/metrics/metrics.go). Labels
// are bounded: a resource the server does not serve, and a non-resource
// path it does not know, are recorded without naming them.
type requestMetrics struct {
	requests    *prometheus.CounterVec   // apiserver_request_total
	durations   *prometheus.HistogramVec // apiserver_request_duration_seconds
	longRunning *prometheus.GaugeVec     // apiserver_longrunning_requests
	watchEvents *prometheus.CounterVec   // apiserver_watch_events_total
	watchers    *prometheus.GaugeVec     // apiserver_registered_watchers
	// readOnly and mutating count the requests served at once, for
	// apiserver_current_inflight_requests.
	readOnly, mutating watermark
	inflightDesc       *prometheus.Desc
}

// apiserverComponent is the component label of every request metric.
const apiserverComponent = "apiserver"

// requestDurationBuckets are kube-apiserver's, chosen for its latency SLO.
var requestDurationBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: requestDurationBuckets,
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_events_total",
			Help: "Number of events sent in watch clients",
		}, []string{"group", "version", "kind"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers",
			Help: "Number of currently registered watchers for a given resources",
		}, []string{"group", "version", "kind"}),
		inflightDesc: prometheus.NewDesc("apiserver_current_inflight_requests",
			"Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
			[]string{"request_kind"}, nil),
	}
	reg.MustRegister(m.requests, m.durations, m.longRunning, m.watchEvents, m.watchers, m)
	return m
}

// Describe implements prometheus.Collector for the in-flight gauges.
func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.inflightDesc }

// Collect implements prometheus.Collector for the in-flight gauges.
func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	ch <- prometheus.MustNewConstMetric(m.inflightDesc, prometheus.GaugeValue, float64(m.readOnly.read(now)), "readOnly")
	ch <- prometheus.MustNewConstMetric(m.inflightDesc, prometheus.GaugeValue, float64(m.mutating.read(now)), "mutating")
}

// metricsHandler serves /metrics from g in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// requestLabels are the labels a request is recorded with.
type requestLabels struct {
	verb, dryRun, group, version, resource, subresource, scope string
}

// labels reads a request's labels as kube-apiserver's MonitorRequest does:
// the verb is the HTTP method's (GET is LIST on a collection, WATCH with
// watch=true, PATCH with an apply body is APPLY; POST, PUT and DELETE stay
// as they are), the scope is resource, namespace or cluster (empty for
// non-resource requests, whose path goes in subresource).
func (s *Server) labels(req *http.Request, call *request) requestLabels {
	a := call.attrs
	l := requestLabels{dryRun: cleanDryRun(req.URL)}
	switch {
	case call.name() != "" || a.Verb == "create":
		l.scope = "resource"
	case call.namespace() != "":
		l.scope = "namespace"
	case a.ResourceRequest:
		l.scope = "cluster"
	}
	l.verb = cleanVerb(req, call, l.scope)
	if !a.ResourceRequest {
		l.subresource = metricsPath(a.Path)
		return l
	}
	if s.reg == nil {
		return l
	}
	// Only what is served is named: a path that names anything else is
	// recorded without its group, version and resource.
	res, ok := s.reg.Resource(call.gvr())
	if !ok {
		return l
	}
	l.group, l.version, l.resource = a.APIGroup, a.APIVersion, a.Resource
	if a.Subresource != "" && res.Kind.Subresource(a.Subresource) != nil {
		l.subresource = a.Subresource
	}
	return l
}

// cleanVerb is kube-apiserver's reported verb (CanonicalVerb, CleanVerb):
// unknown methods are "other".
func cleanVerb(req *http.Request, call *request, scope string) string {
	if call.attrs.Verb == "watch" {
		return "WATCH"
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		if scope != "resource" && scope != "" {
			return "LIST"
		}
		return "GET"
	case http.MethodPatch:
		if req.Header.Get("Content-Type") == string(types.ApplyPatchType) {
			return "APPLY"
		}
		return "PATCH"
	case http.MethodPost, http.MethodPut, http.MethodDelete:
		return req.Method
	}
	return "other"
}

// cleanDryRun is kube-apiserver's dry_run label: the sorted distinct
// values, "invalid" for any but All, empty without the parameter.
func cleanDryRun(u *url.URL) string {
	if !strings.Contains(u.RawQuery, "dryRun") {
		return ""
	}
	values := u.Query()["dryRun"]
	for _, v := range values {
		if v != "All" {
			return "invalid"
		}
	}
	if len(values) == 0 {
		return ""
	}
	return "All"
}

// metricsRoots are the non-resource endpoints metricsPath names.
var metricsRoots = []string{"/healthz", "/livez", "/readyz", "/version", "/metrics", "/openapi/v2", "/openapi/v3", "/debug/pprof", "/ui", SnapshotPath}

// metricsPath is the path a non-resource request is recorded with: the
// endpoint it reaches, so that arbitrary paths make no new series.
func metricsPath(p string) string {
	for _, root := range metricsRoots {
		if p == root || strings.HasPrefix(p, root+"/") {
			return root
		}
	}
	switch {
	case p == "/api" || p == "/apis":
		return p
	case strings.HasPrefix(p, "/api/"):
		return "/api/*"
	case strings.HasPrefix(p, "/apis/"):
		return "/apis/*"
	}
	return "other"
}

// statusWriter records the status code of an answer. It has Unwrap, so
// that http.ResponseController reaches the connection through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// record counts a finished request. A handler that wrote nothing answered
// 200, as net/http does for it.
func (m *requestMetrics) record(l requestLabels, code int, elapsed time.Duration) {
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, apiserverComponent, strconv.Itoa(code)).Inc()
	m.durations.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, apiserverComponent).Observe(elapsed.Seconds())
}

// longRunningStarted counts a long-running request until done is called.
func (m *requestMetrics) longRunningStarted(l requestLabels) (done func()) {
	g := m.longRunning.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, apiserverComponent)
	g.Inc()
	return g.Dec
}

// inflightStarted counts a request against the in-flight gauges until
// done is called.
func (m *requestMetrics) inflightStarted(mutating bool) (done func()) {
	w := &m.readOnly
	if mutating {
		w = &m.mutating
	}
	w.add(1, time.Now())
	return func() { w.add(-1, time.Now()) }
}

// watermark is the most requests served at once within the last second or
// two, as kube-apiserver's apiserver_current_inflight_requests reports
// the maximum of the last second rather than the volatile current count.
type watermark struct {
	mu sync.Mutex // guards the fields below
	// cur is the current count; high the most within the window that
	// began at start; prevHigh the most within the window before it.
	cur, high, prevHigh int
	start               time.Time
}

func (w *watermark) add(d int, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	w.cur += d
	w.high = max(w.high, w.cur)
}

func (w *watermark) read(now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	return max(w.high, w.prevHigh)
}

// roll starts a new one-second window when the current one is over; mu
// must be held.
func (w *watermark) roll(now time.Time) {
	switch el := now.Sub(w.start); {
	case el < time.Second:
		return
	case el < 2*time.Second:
		w.prevHigh = w.high
	default:
		// Nothing changed for a whole window: it held cur throughout.
		w.prevHigh = w.cur
	}
	w.high, w.start = w.cur, now
}

// watchStarted counts a watch of the kind res serves at version until done
// is called, and returns the counter of its events.
func (m *requestMetrics) watchStarted(group, version, kind string) (events prometheus.Counter, done func()) {
	g := m.watchers.WithLabelValues(group, version, kind)
	g.Inc()
	return m.watchEvents.WithLabelValues(group, version, kind), g.Dec
}
