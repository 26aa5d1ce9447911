package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// Authenticator identifies the client of a request. ok is false when the
// request carries no credentials it recognises; err when it carries bad
// ones.
type Authenticator interface {
	Authenticate(req *http.Request) (u auth.User, ok bool, err error)
}

// Config configures a Server.
type Config struct {
	Registry *registry.Registry
	Codecs   *codec.Codecs
	// OpenAPI serves /openapi/v2 and /openapi/v3.
	OpenAPI http.Handler
	// Authenticator identifies clients; requests it does not recognise are
	// answered 401, except the health and version endpoints. nil serves
	// every request without a user.
	Authenticator Authenticator
	// Authorizer decides what users may do; refused requests are answered
	// 403. nil allows everything.
	Authorizer Authorizer
	// Audit records requests in the audit log; nil records nothing.
	Audit *audit.Log
	// MaxRequestsInflight and MaxMutatingRequestsInflight limit the reads
	// and the writes served at once (watches excepted); more are answered
	// 429. 0 means no limit, as in kube-apiserver's flags (whose defaults
	// are DefaultMaxRequestsInflight and
	// DefaultMaxMutatingRequestsInflight).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// MaxWatchesPerUser limits the open watches of one user (system:masters
	// excepted); more are answered 429. 0 means no limit.
	MaxWatchesPerUser int
	Version           version.Info
	// Ready reports whether the server can serve; /readyz fails otherwise.
	Ready func() error
	// ReadyChecks are further checks of /readyz alone, after "storage":
	// conditions in which the server still answers, though not every
	// request (storage refusing writes, say), and /livez stays ok.
	ReadyChecks []HealthCheck
	Logger      *slog.Logger
	// MaxRequestBodyBytes limits request bodies; 0 means kube-apiserver's
	// 3 MiB.
	MaxRequestBodyBytes int64
	// RequestTimeout bounds non-watch requests; 0 means kube-apiserver's
	// 60 s.
	RequestTimeout time.Duration
	// WriteTimeout bounds mutating requests; 0 means kube-apiserver's 34 s.
	WriteTimeout time.Duration
	// WatchWriteTimeout bounds each write of a watch stream: a client that
	// stops reading is disconnected after at most this long; 0 means 60 s.
	// It does not limit how long a watch may stay quiet.
	WatchWriteTimeout time.Duration
	// Metrics, when set, gets kube-apiserver's request metrics (metrics.go),
	// and /metrics serves everything it gathers to users authorized to get
	// that path. nil serves no /metrics.
	Metrics *prometheus.Registry
	// Snapshot, when set, serves SnapshotPath: it writes a snapshot of
	// the store to w, or fails before it writes anything (the error is
	// then answered as any other, a StatusError with its status). nil
	// serves no snapshot.
	Snapshot func(ctx context.Context, w io.Writer) error
	// UI, when set, is served at /ui/ before authentication: it must serve
	// only static files, which then call the API with credentials of
	// their own.
	UI http.Handler
	// LeaseHistory, when set, answers LeaseHistoryPath with the holder
	// histories of a namespace's leases ("" for all), encoded as JSON.
	LeaseHistory func(namespace string) any
}

// Server serves the Kubernetes API. It is an http.Handler.
type Server struct {
	reg    *registry.Registry
	codecs *codec.Codecs
	groups []group
	authn  Authenticator
	authz  Authorizer
	limits *inflight
	// metrics is nil without Config.Metrics.
	metrics        *requestMetrics
	metricsHandler http.Handler
	// reviewCodecs serialize the review kinds (reviews.go).
	reviewCodecs serializer.CodecFactory
	version      version.Info
	ready        func() error
	log          *slog.Logger
	cfg          Config

	// shutdown ends running watches cleanly when the server stops.
	shutdown context.Context
	stop     context.CancelFunc
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBodyBytes == 0 {
		cfg.MaxRequestBodyBytes = 3 << 20
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 34 * time.Second
	}
	if cfg.WatchWriteTimeout == 0 {
		cfg.WatchWriteTimeout = defaultWatchWriteTimeout
	}
	if cfg.Ready == nil {
		cfg.Ready = func() error { return nil }
	}
	shutdown, stop := context.WithCancel(context.Background())
	s := &Server{
		reg:          cfg.Registry,
		codecs:       cfg.Codecs,
		authn:        cfg.Authenticator,
		authz:        cfg.Authorizer,
		limits:       newInflight(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight, cfg.MaxWatchesPerUser),
		reviewCodecs: newReviewCodecs(),
		version:      cfg.Version,
		ready:        cfg.Ready,
		log:          cfg.Logger,
		cfg:          cfg,
		shutdown:     shutdown,
		stop:         stop,
	}
	if cfg.Metrics != nil {
		s.metrics = newRequestMetrics(cfg.Metrics)
		s.metricsHandler = metricsHandler(cfg.Metrics)
	}
	var kinds []*resources.Kind
	if cfg.Registry != nil {
		kinds = cfg.Registry.Kinds()
	}
	s.groups = groupsOf(kinds, reviewResources())
	return s
}

// Shutdown ends running watches cleanly; new requests still get answers.
func (s *Server) Shutdown() { s.stop() }

// The values of headers every answer carries, shared by all of them:
// header values are replaced (Set) or appended to (Add, which copies a
// full slice), never written in place.
var (
	cacheControl = []string{"no-cache, private"}
	noSniff      = []string{"nosniff"}
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	// The canonical form: Get canonicalises any other, an allocation.
	auditID := req.Header.Get("Audit-Id")
	if auditID == "" {
		auditID = uuid.NewString()
	}
	r := parseRequest(req)
	r.auditID[0] = auditID
	setBaseHeader(h, r.auditID[:])

	if s.log.Enabled(req.Context(), slog.LevelDebug) {
		start := time.Now()
		defer func() {
			s.log.Debug("request", "method", req.Method, "uri", req.URL.RequestURI(), "duration", time.Since(start), "audit-id", auditID)
		}()
	}
	r.answer.ResponseWriter = w
	w = &r.answer
	if s.metrics != nil {
		start := time.Now()
		defer func() { s.metrics.record(s.labels(req, r), r.answer.code, time.Since(start)) }()
	}
	s.serveChain(w, req, r)
}

// setBaseHeader sets what every answer carries; auditID is the
// Audit-Id header's values.
func setBaseHeader(h http.Header, auditID []string) {
	h["Audit-Id"] = auditID
	h["Cache-Control"] = cacheControl
	h["X-Content-Type-Options"] = noSniff
}

// serveAPI serves an authorized request.
func (s *Server) serveAPI(w http.ResponseWriter, req *http.Request, call *request) error {
	if call.leaseHistory {
		return s.serveLeaseHistory(w, call)
	}
	// Discovery documents are never at a resource's path.
	if !call.attrs.ResourceRequest && s.serveDiscovery(w, req) {
		return nil
	}
	if strings.HasPrefix(req.URL.Path, "/debug/pprof") {
		// Profiling, as kube-apiserver serves it (--profiling, on by
		// default), to authenticated clients only.
		servePprof(w, req)
		return nil
	}
	if req.URL.Path == SnapshotPath && s.cfg.Snapshot != nil {
		return s.serveSnapshot(w, req)
	}
	if req.URL.Path == "/metrics" && s.metricsHandler != nil {
		s.metricsHandler.ServeHTTP(w, req)
		return nil
	}
	if strings.HasPrefix(req.URL.Path, "/openapi/") && s.cfg.OpenAPI != nil {
		s.cfg.OpenAPI.ServeHTTP(w, req)
		return nil
	}
	if !call.attrs.ResourceRequest || !call.routable || call.attrs.Resource == "" {
		return notFoundPath()
	}
	res, ok := s.reg.Resource(call.gvr())
	if !ok {
		return notFoundPath()
	}
	if err := routeError(res, call); err != nil {
		return err
	}
	// The request's deadline is already set: withDeadline (serveChain).
	switch call.attrs.Verb {
	case "get":
		return s.get(w, req, res, call)
	case "list":
		return s.list(w, req, res, call)
	case "watch":
		return s.watch(w, req, res, call)
	case "create":
		return s.create(w, req, res, call)
	case "update":
		return s.update(w, req, res, call)
	case "patch":
		return s.patch(w, req, res, call)
	case "delete":
		return s.delete(w, req, res, call)
	case "deletecollection":
		return s.deleteCollection(w, req, res, call)
	}
	return methodNotAllowed()
}

// routeError refuses what kube-apiserver's router does not register for
// res, with its 404 or 405.
func routeError(res resources.Resource, call *request) error {
	k := res.Kind
	ns, name, sub, verb := call.namespace(), call.name(), call.attrs.Subresource, call.attrs.Verb
	switch {
	case verb == "proxy":
		return notFoundPath()
	case !k.Namespaced && ns != "":
		return notFoundPath()
	case k.Namespaced && name != "" && ns == "":
		return notFoundPath()
	}
	if call.watchPath {
		// Only GETs of collections and objects live under /watch/.
		if sub != "" {
			return notFoundPath()
		}
		if call.method != http.MethodGet && call.method != http.MethodHead {
			return methodNotAllowed()
		}
	}
	if sub != "" {
		s := k.Subresource(sub)
		if s == nil {
			return notFoundPath()
		}
		if !slices.Contains(s.Verbs, verb) {
			return methodNotAllowed()
		}
		return nil
	}
	switch verb {
	case "":
		return methodNotAllowed()
	case "create":
		// Only the (namespaced) collection accepts POST.
		if name != "" || k.Namespaced && ns == "" {
			return methodNotAllowed()
		}
	case "update", "patch":
		if name == "" {
			return methodNotAllowed()
		}
	case "deletecollection":
		if k.Namespaced && ns == "" {
			return methodNotAllowed()
		}
	}
	if !k.Serves(verb) {
		return methodNotAllowed()
	}
	return nil
}
