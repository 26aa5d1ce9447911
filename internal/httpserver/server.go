package httpserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"

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
	Registry  *registry.Registry
	Codecs    *codec.Codecs
	Resources []*resources.Resource
	// OpenAPI serves /openapi/v2 and /openapi/v3.
	OpenAPI http.Handler
	// Authenticator identifies clients; requests it does not recognise are
	// answered 401, except the health and version endpoints. nil serves
	// every request without a user.
	Authenticator Authenticator
	// Authorizer decides what users may do; refused requests are answered
	// 403. nil allows everything.
	Authorizer Authorizer
	// MaxRequestsInflight and MaxMutatingRequestsInflight limit the reads
	// and the writes served at once (watches excepted); more are answered
	// 429. 0 means no limit (kube-apiserver's defaults are
	// DefaultMaxRequestsInflight and DefaultMaxMutatingRequestsInflight).
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
	// MaxRequestBodyBytes limits request bodies (kube-apiserver: 3 MiB).
	MaxRequestBodyBytes int64
	// RequestTimeout bounds non-watch requests (kube-apiserver: 60 s; 34 s
	// for writes).
	RequestTimeout time.Duration
	// WriteTimeout bounds mutating requests.
	WriteTimeout time.Duration
	// MinWatchTimeout is the lower bound of the random watch duration used
	// when a client gives no timeoutSeconds (kube-apiserver: 1800 s).
	MinWatchTimeout time.Duration
	// BookmarkInterval is how often watches with allowWatchBookmarks get a
	// bookmark; a minute by default.
	BookmarkInterval time.Duration
}

// Server serves the Kubernetes API. It is an http.Handler.
type Server struct {
	reg       *registry.Registry
	codecs    *codec.Codecs
	resources map[resourceKey]*resources.Resource
	groups    []group
	authn     Authenticator
	authz     Authorizer
	limits    *inflight
	// reviewCodecs serialize the review kinds (reviews.go).
	reviewCodecs serializer.CodecFactory
	version      version.Info
	ready        func() error
	log          *slog.Logger
	cfg          Config

	// shutdown is closed when the server stops: watches end cleanly.
	shutdown chan struct{}
	// handlers counts the handler goroutines of withTimeout, which may
	// outlive their request; Wait waits for them.
	handlers sync.WaitGroup
}

type resourceKey struct{ group, version, plural string }

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
	if cfg.MinWatchTimeout == 0 {
		cfg.MinWatchTimeout = 1800 * time.Second
	}
	if cfg.Ready == nil {
		cfg.Ready = func() error { return nil }
	}
	s := &Server{
		reg:          cfg.Registry,
		codecs:       cfg.Codecs,
		resources:    make(map[resourceKey]*resources.Resource, len(cfg.Resources)),
		authn:        cfg.Authenticator,
		authz:        cfg.Authorizer,
		limits:       newInflight(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight, cfg.MaxWatchesPerUser),
		reviewCodecs: newReviewCodecs(),
		version:      cfg.Version,
		ready:        cfg.Ready,
		log:          cfg.Logger,
		cfg:          cfg,
		shutdown:     make(chan struct{}),
	}
	for _, res := range cfg.Resources {
		s.resources[resourceKey{res.Group, res.Version, res.Plural}] = res
	}
	s.groups = groupsOf(slices.Concat(cfg.Resources, reviewResources()))
	return s
}

// Shutdown ends running watches cleanly; new requests still get answers.
func (s *Server) Shutdown() {
	select {
	case <-s.shutdown:
	default:
		close(s.shutdown)
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	auditID := req.Header.Get("Audit-ID")
	if auditID == "" {
		auditID = uuid.NewString()
	}
	h.Set("Audit-ID", auditID)
	h.Set("Cache-Control", "no-cache, private")
	h.Set("X-Content-Type-Options", "nosniff")

	if s.log.Enabled(req.Context(), slog.LevelDebug) {
		start := time.Now()
		defer func() {
			s.log.Debug("request", "method", req.Method, "uri", req.URL.RequestURI(), "duration", time.Since(start), "audit-id", auditID)
		}()
	}
	path := req.URL.Path
	switch {
	case path == "/version" || strings.HasPrefix(path, "/version/"):
		s.serveVersion(w, req)
		return
	case isHealthPath(path):
		s.serveHealth(w, req)
		return
	}
	s.serveChain(w, req)
}

// serveAPI serves a request authorized as a.
func (s *Server) serveAPI(w http.ResponseWriter, req *http.Request, a auth.Attributes) error {
	if s.serveDiscovery(w, req) {
		return nil
	}
	if strings.HasPrefix(req.URL.Path, "/debug/pprof") {
		// Profiling, as kube-apiserver serves it (--profiling, on by
		// default), to authenticated clients only.
		servePprof(w, req)
		return nil
	}
	if strings.HasPrefix(req.URL.Path, "/openapi/") && s.cfg.OpenAPI != nil {
		s.cfg.OpenAPI.ServeHTTP(w, req)
		return nil
	}
	info, ok := parseResourcePath(req)
	if !ok || info.resource == "" {
		return notFoundPath()
	}
	res := s.resources[resourceKey{info.group, info.version, info.resource}]
	if res == nil {
		return notFoundPath()
	}
	if err := s.checkRoute(res, info); err != nil {
		return err
	}
	if !routedAsAuthorized(a, info) {
		s.log.Warn("route and authorization disagree; refused", "method", req.Method, "uri", req.URL.RequestURI(),
			"authorized", fmt.Sprintf("%s %s/%s %s/%s/%s", a.Verb, a.APIGroup, a.Resource, a.Namespace, a.Name, a.Subresource),
			"routed", fmt.Sprintf("%s %s/%s %s/%s/%s", info.verb, info.group, info.resource, info.namespace, info.name, info.subresource))
		return notFoundPath()
	}
	// The request's deadline is already set: withTimeout (serveChain).
	switch info.verb {
	case "get":
		return s.get(w, req, res, info)
	case "list":
		return s.list(w, req, res, info)
	case "watch":
		return s.watch(w, req, res, info)
	case "create":
		return s.create(w, req, res, info)
	case "update":
		return s.update(w, req, res, info)
	case "patch":
		return s.patch(w, req, res, info)
	case "delete":
		return s.delete(w, req, res, info)
	case "deletecollection":
		return s.deleteCollection(w, req, res, info)
	}
	return methodNotAllowed()
}

// routedAsAuthorized reports whether the route serves what authorization
// decided on. The two read the path separately, one as kube-apiserver's
// RequestInfoFactory, the other as its router, and the first is lenient
// because kube-apiserver's router refuses what it does not register; a
// request they read differently is refused rather than served.
func routedAsAuthorized(a auth.Attributes, info requestInfo) bool {
	ns := info.namespace
	if info.resource == "namespaces" {
		ns = info.name // kube-apiserver's quirk: a namespace is its own namespace
	}
	// A list or watch whose field selector fixes metadata.name is
	// authorized with that name.
	sameName := a.Name == info.name || info.name == "" && (info.verb == "list" || info.verb == "watch")
	return a.ResourceRequest && a.APIGroup == info.group && a.APIVersion == info.version &&
		a.Resource == info.resource && a.Subresource == info.subresource &&
		a.Namespace == ns && sameName && a.Verb == info.verb
}

// checkRoute rejects paths that name no route of the resource, with 404
// or 405 as kube-apiserver's router does.
func (s *Server) checkRoute(res *resources.Resource, info requestInfo) error {
	if !res.Namespaced && info.namespace != "" {
		return notFoundPath()
	}
	if res.Namespaced && info.name != "" && info.namespace == "" {
		return notFoundPath()
	}
	if info.watchPath {
		// Only GETs of collections and objects live under /watch/.
		if info.subresource != "" {
			return notFoundPath()
		}
		if info.verb != "watch" {
			return methodNotAllowed()
		}
	}
	if info.subresource != "" {
		if _, ok := res.Subresources[info.subresource]; !ok {
			return notFoundPath()
		}
		switch info.verb {
		case "update":
		case "get", "patch":
			if info.subresource == "finalize" {
				return methodNotAllowed()
			}
		default:
			return methodNotAllowed()
		}
		return nil
	}
	switch info.verb {
	case "":
		return methodNotAllowed()
	case "create":
		// Only the namespaced collection accepts POST.
		if info.name != "" || res.Namespaced && info.namespace == "" {
			return methodNotAllowed()
		}
	case "update", "patch":
		if info.name == "" {
			return methodNotAllowed()
		}
	case "deletecollection":
		if res.Namespaced && info.namespace == "" {
			return methodNotAllowed()
		}
	}
	if !res.Serves(info.verb) {
		return methodNotAllowed()
	}
	return nil
}
