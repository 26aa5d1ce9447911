package etcdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/internal/testkit/ports"
)

const (
	// startTimeout bounds Start: building etcd the first time on a cold
	// build cache takes about a minute; starting a cluster, a second.
	startTimeout = 3 * time.Minute
	// readyTimeout bounds waiting for a started member to be healthy.
	readyTimeout = 30 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
	// pollInterval is how often readiness is polled.
	pollInterval = 10 * time.Millisecond
	// startAttempts is how many times a cluster start is tried on fresh
	// ports when a port was taken by another process meanwhile.
	startAttempts = 3
	// logTail is how much of a member's log a failure report shows.
	logTail = 4 << 10
)

// Config describes a cluster to start.
type Config struct {
	// Size is the number of members; default 1.
	Size int
	// Args are extra flags for every member, such as
	// "--max-request-bytes=2000000".
	Args []string
	// TLS serves clients over TLS only, with client certificates required
	// (--client-cert-auth); Cluster.TLS names the files a client needs.
	// Peers still talk plain HTTP.
	TLS bool
}

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS holds the CA and client certificate of a cluster started with
	// Config.TLS.
	TLS *TLSFiles
}

// Member is one etcd process of a cluster.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	DataDir   string
	// LogFile receives the process's output, across restarts.
	LogFile string

	bin  string
	args []string
	// http talks to the member's client URL (/health).
	http *http.Client
	// tls is the client TLS configuration, nil without TLS.
	tls *tls.Config

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd
	exited <-chan struct{} // closed when the process has exited
}

// Start starts a cluster for the test, waits until every member is healthy
// and stops it when the test ends.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	dir := t.TempDir()
	c, err := StartIn(ctx, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.Members {
				t.Logf("end of etcd member %s's log (%s):\n%s", m.Name, m.LogFile, m.LogTail())
			}
		}
		c.Kill() // the data goes with the test: no need for a graceful stop
	})
	return c
}

// StartIn starts a cluster with its data under dir and waits until every
// member is healthy. The caller must Close it.
func StartIn(ctx context.Context, dir string, cfg Config) (*Cluster, error) {
	if cfg.Size <= 0 {
		cfg.Size = 1
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := tryStart(ctx, bin, filepath.Join(dir, fmt.Sprintf("cluster-%d", attempt)), cfg)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, err
		}
	}
}

var errPortTaken = errors.New("etcdtest: a port was taken by another process")

func tryStart(ctx context.Context, bin, dir string, cfg Config) (*Cluster, error) {
	free, err := ports.Free(2 * cfg.Size)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{}
	scheme := "http"
	var tlsArgs []string
	var clientTLS *tls.Config
	if cfg.TLS {
		files, srv, err := makeTLS(dir)
		if err != nil {
			return nil, fmt.Errorf("etcdtest: certificates: %w", err)
		}
		if clientTLS, err = files.ClientConfig(); err != nil {
			return nil, err
		}
		c.TLS = &files
		scheme = "https"
		tlsArgs = []string{"--cert-file=" + srv.certFile, "--key-file=" + srv.keyFile, "--trusted-ca-file=" + files.CAFile, "--client-cert-auth"}
	}
	var initial []string
	for i := range cfg.Size {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, free[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", free[2*i+1]),
			bin:       bin,
			http:      &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, DisableKeepAlives: true}},
			tls:       clientTLS,
		}
		m.DataDir = filepath.Join(dir, m.Name)
		m.LogFile = filepath.Join(dir, m.Name+".log")
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	token := randomToken()
	for _, m := range c.Members {
		m.args = append([]string{
			"--name=" + m.Name,
			"--data-dir=" + m.DataDir,
			"--listen-client-urls=" + m.ClientURL,
			"--advertise-client-urls=" + m.ClientURL,
			"--listen-peer-urls=" + m.PeerURL,
			"--initial-advertise-peer-urls=" + m.PeerURL,
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + token,
			"--log-level=warn",
		}, append(tlsArgs, cfg.Args...)...)
	}
	for _, m := range c.Members {
		if err := m.start(); err != nil {
			c.Kill()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		c.Kill()
		for _, m := range c.Members {
			if bytes.Contains(m.LogTail(), []byte("address already in use")) {
				return nil, fmt.Errorf("%w: %v", errPortTaken, err)
			}
		}
		return nil, err
	}
	return c, nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns an etcd client of every member, closed when the test
// ends: for tests that look at etcd behind the engine's back.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: c.Members[0].tls, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// WaitHealthy waits until every running member is healthy.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		if err := m.WaitHealthy(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Leader returns the member that the running members agree leads, waiting
// for an election if there is none.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	for {
		if m := c.leader(ctx); m != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

func (c *Cluster) leader(ctx context.Context) *Member {
	var leader *Member
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		st, err := m.status(ctx)
		if err != nil || st.Leader == 0 {
			return nil
		}
		if st.Leader == st.Header.MemberId {
			if leader != nil {
				return nil // two claim it: an election in progress
			}
			leader = m
		}
	}
	return leader
}

// Kill kills every member and waits for the processes to exit.
func (c *Cluster) Kill() {
	for _, m := range c.Members {
		m.Kill()
	}
}

// start starts the member's process.
func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		select {
		case <-m.exited:
		default:
			return fmt.Errorf("etcdtest: member %s is already running", m.Name)
		}
	}
	cmd := exec.Command(m.bin, m.args...)
	exited, err := StartProcess(cmd, m.LogFile)
	if err != nil {
		return fmt.Errorf("etcdtest: starting member %s: %w", m.Name, err)
	}
	m.cmd, m.exited = cmd, exited
	return nil
}

// StartProcess starts cmd with its output appended to logPath, so that it
// dies with the test binary: a goroutine locked to its OS thread starts
// and waits for it, and the kernel kills it when that thread ends
// (PR_SET_PDEATHSIG on Linux). exited is closed when it has exited.
func StartProcess(cmd *exec.Cmd, logPath string) (exited <-chan struct{}, err error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer logf.Close()
		// Never unlocked: the thread ends with this goroutine, after the
		// process has exited.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-done
		return nil, err
	}
	return done, nil
}

// Running reports whether the member's process is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Kill kills the member with SIGKILL and waits for the process to exit.
func (m *Member) Kill() { m.signal(syscall.SIGKILL, 0) }

// Stop stops the member with SIGTERM (SIGKILL after stopTimeout) and waits
// for the process to exit. Stopping a stopped member does nothing.
func (m *Member) Stop() { m.signal(syscall.SIGTERM, stopTimeout) }

func (m *Member) signal(sig syscall.Signal, grace time.Duration) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-exited:
			return
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-exited
}

// Restart starts a stopped or killed member again on its data directory
// and waits until it is healthy (which, in a cluster, needs a leader).
func (m *Member) Restart(ctx context.Context) error {
	if err := m.start(); err != nil {
		return err
	}
	return m.WaitHealthy(ctx)
}

// WaitHealthy polls the member's /health until it says true, the process
// exits, or ctx (at most readyTimeout) ends.
func (m *Member) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	m.mu.Lock()
	exited := m.exited
	m.mu.Unlock()
	var last error
	for {
		if last = m.health(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("etcdtest: member %s exited before it was healthy:\n%s", m.Name, m.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: member %s not healthy: %v (%w)", m.Name, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

func (m *Member) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil {
		return fmt.Errorf("GET /health: %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || h.Health != "true" {
		return fmt.Errorf("GET /health: %s: health %q %s", resp.Status, h.Health, h.Reason)
	}
	return nil
}

func (m *Member) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, TLS: m.tls, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.Status(ctx, m.ClientURL)
}

// LogTail returns the end of the member's log.
func (m *Member) LogTail() []byte {
	b, err := os.ReadFile(m.LogFile)
	if err != nil {
		return []byte(err.Error())
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return b
}

func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "etcdtest-" + hex.EncodeToString(b)
}
