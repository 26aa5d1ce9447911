// Package testserver starts a real leasehold server for tests: in-process,
// on a loopback port chosen by the kernel, with a temporary data directory,
// stopped when the test ends. Only tests import it.
//
// Servers serve HTTP/2 with leasehold's own server unless
// $LEASEHOLD_TEST_HTTP2 is "go" (net/http's).
//
// Servers use the embedded storage engine unless $LEASEHOLD_TEST_STORAGE is
// "etcd": then every server of the test binary keeps its data in one shared
// single-member etcd (internal/testkit/etcdtest.Shared), each under a key prefix of
// its own derived from its data directory (so a server restarted on the
// same directory finds its data again). That runs a whole test suite
// unchanged against the etcd engine; CI does it for test/integration.
package testserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// Server is a running leasehold.
type Server struct {
	*server.Server
	// DataDir is the server's data directory.
	DataDir string
	// Config is the admin REST config (JSON).
	Config *rest.Config
	cancel context.CancelFunc
	done   chan error
}

// Option changes the server configuration.
type Option func(*server.Config)

// StorageEnv names the environment variable that selects the storage
// engine of the servers Start starts: "etcd", or "embedded" (the default).
const StorageEnv = "LEASEHOLD_TEST_STORAGE"

// HTTP2Env names the environment variable that selects the HTTP/2 server
// of the servers Start starts: "go" (net/http's), or "leasehold" (the
// default). CI runs test/integration with each.
const HTTP2Env = "LEASEHOLD_TEST_HTTP2"

// Etcd stores the server's data in the etcd cluster at endpoints, under
// prefix, without compaction.
func Etcd(endpoints []string, prefix string) Option {
	return func(c *server.Config) {
		c.Storage = server.StorageEtcd
		c.EtcdServers = endpoints
		c.EtcdPrefix = prefix
		c.EtcdCompactInterval = -1
	}
}

// storageFromEnv returns the options that $LEASEHOLD_TEST_STORAGE asks
// for, for a server on dataDir.
func storageFromEnv(t testing.TB, dataDir string) []Option {
	t.Helper()
	switch v := os.Getenv(StorageEnv); v {
	case "", server.StorageEmbedded:
		return nil
	case server.StorageEtcd:
		c, err := etcdtest.Shared()
		if err != nil {
			t.Fatalf("$%s=etcd: %v", StorageEnv, err)
		}
		sum := sha256.Sum256([]byte(dataDir))
		// One replica per prefix: its controllers need no election, and
		// no election Lease shows in the test's lists.
		standalone := func(c *server.Config) { c.Standalone = true }
		return []Option{Etcd(c.Endpoints(), "/leasehold-test/"+hex.EncodeToString(sum[:8])), standalone}
	default:
		t.Fatalf("$%s=%q: want etcd or embedded", StorageEnv, v)
		return nil
	}
}

// Start starts leasehold in a fresh data directory and stops it when the
// test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return StartIn(t, t.TempDir(), opts...)
}

// StartIn starts leasehold on an existing data directory.
func StartIn(t testing.TB, dataDir string, opts ...Option) *Server {
	t.Helper()
	cfg := server.Config{
		DataDir:                   dataDir,
		Listen:                    "127.0.0.1:0",
		CoordinatedLeaderElection: true,
		Logger:                    Logger(),
		ShutdownTimeout:           10 * time.Second,
		HTTP2Server:               os.Getenv(HTTP2Env),
	}
	for _, o := range append(storageFromEnv(t, dataDir), opts...) {
		o(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("starting server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Server: srv, DataDir: dataDir, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-s.done:
		t.Fatalf("server stopped before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready after 30s")
	}
	t.Cleanup(s.Stop)
	s.Config, err = clientcmd.BuildConfigFromFlags("", srv.Kubeconfig())
	if err != nil {
		t.Fatalf("loading kubeconfig: %v", err)
	}
	s.Config.QPS, s.Config.Burst = -1, 0
	return s
}

// Stop stops the server and waits for it; safe to call twice.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	<-s.done
}

// Client returns a typed clientset speaking JSON.
func (s *Server) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(rest.CopyConfig(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ProtoConfig returns a REST config speaking protobuf, as kube components
// and controller-runtime do.
func (s *Server) ProtoConfig() *rest.Config {
	cfg := rest.CopyConfig(s.Config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

// ProtoClient returns a typed clientset speaking protobuf.
func (s *Server) ProtoClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.ProtoConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Clients returns the JSON and the protobuf clientsets by name, for tests
// that run against both.
func (s *Server) Clients(t testing.TB) map[string]kubernetes.Interface {
	return map[string]kubernetes.Interface{"json": s.Client(t), "protobuf": s.ProtoClient(t)}
}

// Logger discards logs unless LEASEHOLD_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("LEASEHOLD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
