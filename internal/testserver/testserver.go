// Package testserver starts a real leasehold server for tests: in-process,
// on a loopback port chosen by the kernel, with a temporary data directory,
// stopped when the test ends. Only tests import it.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/server"
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
	}
	for _, o := range opts {
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
