package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(t.Context())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn"}, io.Discard, &stderr)
	}()
	// At warn level the connection hint is not logged: wait for the
	// kubeconfig instead.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if info, err := os.Stat(filepath.Join(dir, "admin.kubeconfig")); err == nil {
			if info.Mode().Perm() != 0o600 {
				t.Errorf("admin.kubeconfig mode %v, want 0600", info.Mode().Perm())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kubeconfig after 20s; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}

func TestServeLogsHowToConnect(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "export KUBECONFIG="+filepath.Join(dir, "admin.kubeconfig")) {
		if time.Now().After(deadline) {
			t.Fatalf("no connection hint; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCommands(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"version"}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "leasehold ") {
		t.Errorf("version: %q %v", out.String(), err)
	}
	if err := Run(t.Context(), []string{"bogus"}, io.Discard, io.Discard); err == nil {
		t.Error("unknown command accepted")
	}
	if err := Run(t.Context(), []string{"serve", "--listen", "not-an-address", "--data-dir", t.TempDir()}, io.Discard, io.Discard); err == nil {
		t.Error("bad --listen accepted")
	}
	if err := Run(t.Context(), []string{"serve", "--log-level", "loud"}, io.Discard, io.Discard); err == nil {
		t.Error("bad --log-level accepted")
	}
	if err := Run(t.Context(), []string{"serve", "--disable-admission-plugins", "NamespaceLifecycle"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "only OwnerReferencesPermissionEnforcement") {
		t.Errorf("--disable-admission-plugins NamespaceLifecycle: %v", err)
	}
}
