package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/controllers/clusterroleaggregation"
	electioncontroller "github.com/leasehold/leasehold/internal/controllers/election"
	"github.com/leasehold/leasehold/internal/controllers/endpointslicemirroring"
	"github.com/leasehold/leasehold/internal/controllers/garbagecollector"
	"github.com/leasehold/leasehold/internal/controllers/leaseexpiry"
	"github.com/leasehold/leasehold/internal/controllers/leasemetrics"
	namespacecontroller "github.com/leasehold/leasehold/internal/controllers/namespace"
	"github.com/leasehold/leasehold/internal/controllers/registrations"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/h2server"
	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/transport"
	"github.com/leasehold/leasehold/internal/webui"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the store, the certificates and admin.kubeconfig.
	DataDir string
	// Listen is the address to serve on (host:port; port 0 picks one).
	Listen string
	// CoordinatedLeaderElection keeps and validates Lease spec.strategy and
	// spec.preferredHolder; false drops them as kube-apiserver does by
	// default.
	CoordinatedLeaderElection bool
	// WatchWindow is the number of events per resource kept for watches
	// resuming from the past.
	WatchWindow int
	Logger      *slog.Logger
	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// when the server stops.
	ShutdownTimeout time.Duration

	// Storage selects the storage engine: StorageEmbedded (the default,
	// also for "") keeps the data under DataDir; StorageEtcd keeps it in
	// the etcd cluster at EtcdServers, so that several replicas can share
	// it.
	Storage string
	// EtcdServers are the etcd members' client URLs (StorageEtcd).
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are PEM files for TLS to
	// etcd: the CA that verifies the members, and this client's
	// certificate and key.
	EtcdCAFile   string
	EtcdCertFile string
	EtcdKeyFile  string
	// EtcdPrefix is the key prefix of every object in etcd, "/registry"
	// when empty (kube-apiserver's --etcd-prefix). Replicas of one
	// leasehold share it; separate leaseholds on one cluster use different
	// prefixes.
	EtcdPrefix string
	// StorageQuotaBytes bounds the data of the embedded store (keys and
	// values of the current objects): writes that would grow it beyond
	// are refused. 0 means embedded.DefaultQuotaBytes, negative no quota.
	StorageQuotaBytes int64
	// StorageReserveBytes is the free space the embedded store keeps on
	// its filesystem: below it, writes other than deletes are refused.
	// 0 means embedded.DefaultReserveBytes, negative none.
	StorageReserveBytes int64
	// StorageCommitInterval paces the embedded store's group commits
	// while writes are many (embedded.Options.CommitInterval). 0 means
	// embedded.DefaultCommitInterval, negative none.
	StorageCommitInterval time.Duration
	// StorageFS, when set, is the file system of the embedded store
	// instead of the operating system's: tests inject disk faults with it.
	StorageFS vfs.FS
	// EtcdCompactInterval is how often etcd's history is compacted (the
	// replicas take turns); 0 means 5 minutes, negative disables it
	// (kube-apiserver's --etcd-compaction-interval).
	EtcdCompactInterval time.Duration

	// TLSCertFile and TLSKeyFile are a serving certificate (PEM, with its
	// intermediates) and its key, instead of the one leasehold generates
	// with its CA (kube-apiserver's --tls-cert-file and
	// --tls-private-key-file). Both or neither.
	TLSCertFile string
	TLSKeyFile  string
	// ClientCAFile holds PEM CAs whose client certificates are trusted, in
	// addition to leasehold's own CA (kube-apiserver's --client-ca-file).
	// It is re-read when it changes.
	ClientCAFile string
	// TokenAuthFile is a static token file (kube-apiserver's
	// --token-auth-file), re-read when it changes.
	TokenAuthFile string
	// AnonymousAuth lets requests without credentials in as user
	// system:anonymous, group system:unauthenticated; refused with 401
	// otherwise (kube-apiserver's --anonymous-auth, whose default is true).
	AnonymousAuth bool
	// AuthorizationModes are kube-apiserver's --authorization-mode: RBAC,
	// ABAC or AlwaysAllow, asked in order after system:masters. Empty
	// means RBAC, or ABAC alone when AuthorizationPolicyFile is set (as
	// before the flag existed). See AuthorizationModes.
	AuthorizationModes []string
	// AuthorizationPolicyFile is an ABAC policy file (kube-apiserver's
	// --authorization-policy-file), re-read when it changes.
	AuthorizationPolicyFile string
	// AuditLogPath is the audit log file, "-" for standard output
	// (kube-apiserver's --audit-log-path); events are recorded only with
	// an AuditPolicyFile (--audit-policy-file) too.
	AuditLogPath    string
	AuditPolicyFile string
	// AuditLogMaxSizeMB, AuditLogMaxBackups and AuditLogMaxAgeDays rotate
	// the audit log: at this many megabytes (0: 100), keeping this many
	// old files (0: all) for this many days (0: no limit).
	AuditLogMaxSizeMB  int
	AuditLogMaxBackups int
	AuditLogMaxAgeDays int
	// MaxRequestsInflight and MaxMutatingRequestsInflight limit the reads
	// and the writes served at once (watches excepted); 0 means no limit,
	// as in kube-apiserver's flags (whose defaults, 400 and 200, are the
	// command line's).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// MaxWatchesPerUser limits the open watches of one user name
	// (system:masters excepted); 0 means no limit, as in kube-apiserver.
	MaxWatchesPerUser int
	// AuthReloadInterval is how often the token, client CA and policy
	// files are checked for changes; 0 means every second.
	AuthReloadInterval time.Duration
	// MinRequestTimeout is the shortest life of a watch that gives no
	// timeoutSeconds: each lasts a random time between it and twice it
	// (kube-apiserver's --min-request-timeout); 0 means 1800 s.
	MinRequestTimeout time.Duration
	// HTTP2Server chooses the HTTP/2 server: transport.HTTP2Leasehold
	// ("" too) or transport.HTTP2Go.
	HTTP2Server string
	// WatchWriteTimeout bounds each write of a watch stream, so that a
	// client that stops reading is disconnected; 0 means 60 s. Tests
	// shorten it.
	WatchWriteTimeout time.Duration
	// BookmarkInterval is how often a watch with allowWatchBookmarks gets
	// a bookmark; 0 means a minute, as kube-apiserver. Tests shorten it.
	BookmarkInterval time.Duration
	// Kinds are the kinds served; nil means builtin.Kinds. Tests add kinds
	// of their own.
	Kinds []*resources.Kind
	// DisabledAdmissionPlugins names the admission plugins turned off:
	// only OwnerReferencesPermissionEnforcement can be.
	DisabledAdmissionPlugins []string
	// Standalone says no other replica shares the etcd prefix, so
	// singleton controllers run without being elected with a Lease. The
	// embedded engine is always standalone.
	Standalone bool
	// EventTTL is how long an Event lives after its last write
	// (kube-apiserver's --event-ttl); 0 means forever.
	EventTTL time.Duration
}

// Storage engines for Config.Storage.
const (
	StorageEmbedded = "embedded"
	StorageEtcd     = "etcd"
)

// EmbeddedDir is the directory of the embedded store inside the data
// directory.
const EmbeddedDir = "data"

// DefaultEtcdCompactInterval is kube-apiserver's default
// --etcd-compaction-interval.
const DefaultEtcdCompactInterval = etcd.DefaultCompactInterval

// Server is a running leasehold.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store storage.Interface
	reg   *registry.Registry
	// controllers run beside the registry.
	controllers *controllers.Runner
	leaseExpiry *leaseexpiry.Expirer
	gc          *garbagecollector.Collector
	// leaseMetrics observes the leases for /metrics; nil when the kinds
	// served have no Lease.
	leaseMetrics *leasemetrics.Observer
	api          *httpserver.Server
	http         *http.Server
	listener     net.Listener
	certs        *pki.Bundle
	// dirLock holds the data directory for the server's life.
	dirLock *datadir.Lock
	// reloaders re-read the authentication and authorization files.
	reloaders []func(context.Context) error
	// auditLog writes the audit log; nil when there is none.
	auditLog *audit.Log

	readyOnce sync.Once
	ready     chan struct{}
	probe     *storageProbe
}

// New opens the store, prepares certificates and binds the listener. Run
// serves.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ready: make(chan struct{})}

	// Nothing in the data directory is touched before it is ours.
	lock, err := datadir.Acquire(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s.dirLock = lock
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.listener = ln
	// Every later failure releases what New took.
	ok := false
	defer func() {
		if !ok {
			ln.Close()
			lock.Release()
		}
	}()
	// The certificate covers the address actually bound (port 0 resolved).
	addr := ln.Addr().String()
	certs, err := pki.Ensure(cfg.DataDir, addr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	s.certs = certs
	reload := auth.Reload{Interval: cfg.AuthReloadInterval, Logger: cfg.Logger}
	servingCert, caPEM, err := s.servingCertificate(cfg, certs)
	if err != nil {
		return nil, err
	}
	if err := certs.WriteKubeconfig("https://"+addr, caPEM); err != nil {
		return nil, fmt.Errorf("updating %s: %w", certs.AdminKubeconfig, err)
	}
	authn, serving, err := s.security(cfg, certs, servingCert, reload)
	if err != nil {
		return nil, err
	}
	if s.auditLog, err = openAuditLog(cfg); err != nil {
		return nil, err
	}
	rbacObjects := &rbacSource{}
	authz, err := s.authorizer(cfg, reload, rbacObjects)
	if err != nil {
		return nil, err
	}

	kinds := cfg.Kinds
	if kinds == nil {
		kinds = builtin.Kinds(builtin.Options{CoordinatedLeaderElection: cfg.CoordinatedLeaderElection, EventTTL: cfg.EventTTL})
	}
	m := newMetrics()
	store, prefix, err := openStore(cfg, m, kinds)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	s.store = store
	s.probe = &storageProbe{store: store, log: cfg.Logger}

	if s.reg, err = newRegistry(cfg, store, prefix, kinds,
		admissionSteps(cfg, authz, rbacObjects, kinds)...); err != nil {
		store.Close()
		return nil, err
	}
	if err := rbacObjects.bind(s.reg); err != nil && slices.Contains(cfg.authorizationModes(), ModeRBAC) {
		store.Close()
		return nil, err
	}
	m.registry.MustRegister(newStorageCollector(s.reg, store))
	if s.leaseMetrics, err = leasemetrics.New(s.reg, leasemetrics.Options{Logger: cfg.Logger}); err == nil {
		m.registry.MustRegister(s.leaseMetrics)
	} else {
		// Test kinds without leases.
		s.log.Debug("no lease metrics", "err", err)
		s.leaseMetrics = nil
	}
	s.gc = garbagecollector.New(s.reg, cfg.Logger)
	m.registry.MustRegister(s.gc)
	if s.leaseExpiry, err = leaseexpiry.New(s.reg, cfg.Logger); err == nil {
		m.registry.MustRegister(s.leaseExpiry)
	} else {
		s.leaseExpiry = nil
	}
	s.controllers = controllers.NewRunner(s.reg, cfg.Logger, cfg.Storage == StorageEtcd && !cfg.Standalone)
	s.api = httpserver.New(httpserver.Config{
		OpenAPI:                     s.reg.OpenAPI(),
		Registry:                    s.reg,
		Codecs:                      s.reg.Codecs(),
		Authenticator:               authn,
		Authorizer:                  authz,
		Audit:                       s.auditLog,
		MaxRequestsInflight:         cfg.MaxRequestsInflight,
		MaxMutatingRequestsInflight: cfg.MaxMutatingRequestsInflight,
		MaxWatchesPerUser:           cfg.MaxWatchesPerUser,
		Version:                     buildinfo.KubeVersion(),
		Ready:                       s.checkReady,
		ReadyChecks:                 []httpserver.HealthCheck{s.probe.spaceCheck()},
		Logger:                      cfg.Logger,
		WatchWriteTimeout:           cfg.WatchWriteTimeout,
		Metrics:                     m.registry,
		Snapshot:                    s.snapshot,
		UI:                          webui.Handler(),
		LeaseHistory:                s.leaseHistory,
	})
	s.http, err = transport.New(transport.Config{
		Handler:   s.api,
		TLSConfig: serving,
		HTTP2:     cfg.HTTP2Server,
		ErrorLog:  slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		OnClientError: func(e h2server.ClientError) {
			m.clientErrors.WithLabelValues(e.Kind).Inc()
			if e.First {
				s.log.Warn("an HTTP/2 client's error, as an attack's", "kind", e.Kind, "client", e.Remote, "err", e.Err)
			}
		},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	ok = true
	return s, nil
}

// EtcdSnapshotMessage is the answer to a snapshot request when the data
// is in etcd: etcd owns it, and its own tools save and restore it
// consistently (the keys under --etcd-prefix are only part of a member's
// database).
const EtcdSnapshotMessage = "this leasehold keeps its data in etcd (--storage=etcd), which owns it: " +
	"save a snapshot with etcdctl snapshot save FILE (against one member) and restore it with etcdutl snapshot restore"

// snapshot writes a snapshot of the embedded store to w.
func (s *Server) snapshot(ctx context.Context, w io.Writer) error {
	store, ok := s.store.(*embedded.Store)
	if !ok {
		return apierrors.NewBadRequest(EtcdSnapshotMessage)
	}
	start := time.Now()
	info, err := store.Snapshot(ctx, w)
	if err != nil {
		return err
	}
	s.log.Info("snapshot sent", "revision", info.Revision, "keys", info.Keys, "bytes", info.Bytes, "duration", time.Since(start))
	return nil
}

// controllerList is every controller the server runs beside the
// registry.
func (s *Server) controllerList() []controllers.Controller {
	cs := []controllers.Controller{
		namespacecontroller.New(s.reg, s.log),
		s.gc.Controller(),
	}
	if _, ok := s.reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}); ok {
		cs = append(cs, clusterroleaggregation.New(s.reg, s.log))
	}
	if _, ok := s.reg.ResourceFor(electioncontroller.LeaseCandidates); ok && s.cfg.CoordinatedLeaderElection {
		cs = append(cs, electioncontroller.New(s.reg, s.log))
	}
	if _, ok := s.reg.ResourceFor(endpointslicemirroring.EndpointSliceKind); ok {
		cs = append(cs, endpointslicemirroring.New(s.reg, s.log), registrations.New(s.reg, s.log))
	}
	if s.leaseMetrics != nil {
		cs = append(cs, s.leaseMetrics.Controller())
	}
	if s.leaseExpiry != nil {
		cs = append(cs, s.leaseExpiry.Controller())
	}
	return cs
}

// OwnerReferencesPermissionEnforcement is the admission plugin
// --disable-admission-plugins can turn off, by kube-apiserver's name.
const OwnerReferencesPermissionEnforcement = "OwnerReferencesPermissionEnforcement"

// admissionSteps are the steps after NamespaceLifecycle.
func admissionSteps(cfg Config, authz *auth.Authorizer, src *rbacSource, kinds []*resources.Kind) []admission.Step {
	steps := []admission.Step{escalationStep(authz, src)}
	if !slices.Contains(cfg.DisabledAdmissionPlugins, OwnerReferencesPermissionEnforcement) {
		steps = append(steps, admission.OwnerReferences{Authorizer: authz, Kinds: kinds})
	}
	return steps
}

// newRegistry builds the registry of kinds, which builds their codecs and
// OpenAPI documents, with the admission chain NamespaceLifecycle, then
// steps.
func newRegistry(cfg Config, store storage.Interface, prefix string, kinds []*resources.Kind, steps ...admission.Step) (*registry.Registry, error) {
	var chain admission.Chain
	if ns := resources.Find(kinds, schema.GroupKind{Kind: "Namespace"}); ns != nil {
		chain = append(chain, admission.NamespaceLifecycle{Namespaces: ns.Storage()})
	}
	chain = append(chain, steps...)
	reg, err := registry.New(registry.Config{
		Store:            store,
		Prefix:           prefix,
		Kinds:            kinds,
		Admission:        chain,
		WatchWindow:      cfg.WatchWindow,
		MinWatchTimeout:  cfg.MinRequestTimeout,
		BookmarkInterval: cfg.BookmarkInterval,
		Logger:           cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return reg, nil
}

// openStore opens the configured storage engine and returns it with the
// registry's key prefix ("" for the registry's default).
func openStore(cfg Config, m *metrics, kinds []*resources.Kind) (storage.Interface, string, error) {
	switch cfg.Storage {
	case "", StorageEmbedded:
		m.registry.MustRegister(m.commitSync, m.commitWrites, m.commitFailure)
		store, err := embedded.Open(filepath.Join(cfg.DataDir, EmbeddedDir), embedded.Options{
			Logger:         cfg.Logger,
			QuotaBytes:     cfg.StorageQuotaBytes,
			ReserveBytes:   cfg.StorageReserveBytes,
			CommitInterval: cfg.StorageCommitInterval,
			FS:             cfg.StorageFS,
			OnCommit:       m.onCommit,
		})
		return store, "", err
	case StorageEtcd:
		prefix, err := etcdPrefix(cfg.EtcdPrefix)
		if err != nil {
			return nil, "", err
		}
		if len(cfg.EtcdServers) == 0 {
			return nil, "", errors.New("the etcd storage needs at least one etcd server")
		}
		m.setKeys(kinds, prefix)
		m.registry.MustRegister(m.etcdRequests)
		store, err := etcd.Open(context.Background(), etcd.Options{
			Endpoints:       cfg.EtcdServers,
			TLS:             etcd.TLS{CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile},
			CompactInterval: cfg.EtcdCompactInterval,
			Logger:          cfg.Logger,
			OnRequest:       m.onEtcdRequest,
		})
		return store, prefix, err
	default:
		return nil, "", fmt.Errorf("unknown storage %q (want %q or %q)", cfg.Storage, StorageEmbedded, StorageEtcd)
	}
}

// etcdPrefix normalizes an etcd key prefix: "/registry" when empty, one
// leading slash, no trailing slash (the registry appends "/resource/...",
// as kube-apiserver's path.Join does).
func etcdPrefix(p string) (string, error) {
	if p == "" {
		return "/registry", nil
	}
	p = "/" + strings.Trim(p, "/")
	if p == "/" {
		return "", errors.New(`etcd prefix "/" would put objects at the root of etcd's key space; use a named prefix such as /registry`)
	}
	return p, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the https URL of the server.
func (s *Server) URL() string { return "https://" + s.Addr() }

// Kubeconfig is the path of the admin kubeconfig.
func (s *Server) Kubeconfig() string { return s.certs.AdminKubeconfig }

// Ready is closed once the server answers requests with its full state.
func (s *Server) Ready() <-chan struct{} { return s.ready }

func (s *Server) checkReady() error {
	select {
	case <-s.ready:
	default:
		return errors.New("not ready")
	}
	return s.probe.check()
}

// Run serves until ctx ends, then shuts down gracefully: the listener
// closes, watches end cleanly, in-flight requests finish (within
// ShutdownTimeout), and the store closes after them. If the store fails
// for good first (an I/O error of the embedded store), Run shuts down the
// same way within 2 s and returns the failure, for the process to exit
// and be restarted (see failure.go).
func (s *Server) Run(ctx context.Context) error {
	defer s.dirLock.Release()
	defer s.store.Close()
	bg, cancelBG := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBG()
	g, gctx := errgroup.WithContext(bg)
	g.Go(func() error { return s.reg.Run(gctx) })
	for _, run := range s.reloaders {
		g.Go(func() error { return run(gctx) })
	}
	if s.auditLog != nil {
		// It writes until the requests are done (gctx ends after them).
		g.Go(func() error { return s.auditLog.Run(gctx) })
	}

	failed := storeFailed(s.store)
	select {
	case <-s.reg.Ready():
	case <-ctx.Done():
		cancelBG()
		_ = g.Wait()
		return nil
	case <-gctx.Done():
		return g.Wait()
	case <-failed:
		cancelBG()
		_ = g.Wait()
		return s.storeFailure()
	}
	if err := s.ensureSystemObjects(ctx); err != nil {
		cancelBG()
		_ = g.Wait()
		if ctx.Err() != nil {
			// Stopped while starting (the select above may find the
			// registry ready and ctx done at once): not a failure, as
			// in the select.
			return nil
		}
		return err
	}
	g.Go(func() error { return s.controllers.Run(gctx, s.controllerList()...) })
	s.readyOnce.Do(func() { close(s.ready) })

	serveErr := make(chan error, 1)
	go func() { serveErr <- transport.Serve(s.http, s.listener) }()

	timeout := s.cfg.ShutdownTimeout
	var failure error
	select {
	case err := <-serveErr:
		cancelBG()
		_ = g.Wait()
		return err
	case <-ctx.Done():
		s.log.Info("shutting down")
	case <-failed:
		failure = s.storeFailure()
		timeout = min(timeout, failedShutdownTimeout)
	}
	s.api.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.http.Shutdown(sctx)
	if failure != nil {
		err = failure
	}
	<-serveErr
	if sctx.Err() != nil {
		// Shutdown waits for handlers; past its timeout they may run on
		// while the store closes.
		s.log.Warn("shutting down with requests still running")
	}
	cancelBG()
	if werr := g.Wait(); werr != nil && err == nil {
		err = werr
	}
	return err
}

// security builds the authenticator and the TLS configuration from cfg,
// and registers the file reloaders Run starts.
func (s *Server) security(cfg Config, certs *pki.Bundle, serving tls.Certificate, reload auth.Reload) (*auth.Authenticator, *tls.Config, error) {
	cas, err := auth.NewCABundle([]*x509.Certificate{certs.CACert}, cfg.ClientCAFile, reload)
	if err != nil {
		return nil, nil, err
	}
	if cfg.ClientCAFile != "" {
		s.reloaders = append(s.reloaders, cas.Run)
	}
	var tokens *auth.TokenFile
	if cfg.TokenAuthFile != "" {
		if tokens, err = auth.NewTokenFile(cfg.TokenAuthFile, reload); err != nil {
			return nil, nil, err
		}
		s.reloaders = append(s.reloaders, tokens.Run)
	}
	if cfg.AnonymousAuth {
		s.log.Warn("anonymous requests are allowed (--anonymous-auth): they are user system:anonymous in group system:unauthenticated")
	}
	authn := auth.NewAuthenticator(auth.AuthenticatorConfig{ClientCAs: cas, Tokens: tokens, Anonymous: cfg.AnonymousAuth})
	base := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{serving},
		// Client certificates are verified by the authenticator, so that
		// one that does not verify is a 401 (as in kube-apiserver), not a
		// failed handshake.
		ClientAuth: tls.RequestClientCert,
		NextProtos: []string{"h2", "http/1.1"},
	}
	tlsConfig := base.Clone()
	// Advertise the trusted CAs of the moment, which change with the
	// client CA file.
	tlsConfig.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = cas.Pool()
		return c, nil
	}
	return authn, tlsConfig, nil
}

// servingCertificate returns the certificate to serve and the root
// admin.kubeconfig trusts for it: the generated certificate and CA, or the
// certificate of --tls-cert-file and --tls-private-key-file with the root
// the file ends with (or the certificate itself when it is self-signed),
// else nil for the system's roots.
func (s *Server) servingCertificate(cfg Config, certs *pki.Bundle) (tls.Certificate, []byte, error) {
	if cfg.TLSCertFile == "" && cfg.TLSKeyFile == "" {
		return certs.Serving, certs.CAPEM, nil
	}
	if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
		return tls.Certificate{}, nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
	}
	last, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
	}
	if last.CheckSignatureFrom(last) != nil {
		s.log.Info("the serving certificate's chain does not end with a root; admin.kubeconfig trusts the system's roots for it")
		return cert, nil, nil
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: last.Raw}), nil
}

// ensureSystemObjects writes what every server has before it is ready:
// the system namespaces and the RBAC policy.
func (s *Server) ensureSystemObjects(ctx context.Context) error {
	if err := namespacecontroller.EnsureSystem(ctx, s.reg); err != nil {
		return fmt.Errorf("creating system namespaces: %w", err)
	}
	return s.ensureRBACPolicy(ctx)
}

// leaseHistory is the lease metrics' holder history, for the live view;
// empty without lease metrics (test kinds without leases).
func (s *Server) leaseHistory(namespace string) any {
	if s.leaseMetrics == nil {
		return leasemetrics.HistoryList{Leases: []leasemetrics.LeaseHistory{}}
	}
	return s.leaseMetrics.History(namespace)
}
