package multi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/ports"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const (
	// etcdPrefix is the replicas' --etcd-prefix: the default.
	etcdPrefix = "/registry"
	// requestTimeout bounds every client request of the tests, longer
	// than the engine's own etcd request timeout (10 s), so that the
	// server answers first when etcd is slow.
	requestTimeout = 15 * time.Second
	// readyTimeout bounds waiting for a replica to serve.
	readyTimeout = 30 * time.Second
)

// sharedFiles are the files every replica's pki directory shares: the CA
// that signs every serving and client certificate, and the admin client
// certificate and key, so that one admin.kubeconfig works against every
// replica. Each replica makes its own serving certificate (for its listen
// address, localhost and 127.0.0.1), signed by the shared CA.
var sharedFiles = []string{"ca.crt", "ca.key", "admin.crt", "admin.key"}

// shareCredentials copies the shared pki files of the replica in from to
// the data directory to, which must not have started yet.
func shareCredentials(from, to string) error {
	if err := os.MkdirAll(filepath.Join(to, "pki"), 0o700); err != nil {
		return err
	}
	for _, name := range sharedFiles {
		b, err := os.ReadFile(filepath.Join(from, "pki", name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, "pki", name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// replica is one leasehold replica: in-process or a real process. (An
// interface at a real boundary: the same tests drive both.)
type replica interface {
	// Name names the replica in messages.
	Name() string
	// URL is the replica's https URL, stable across restarts.
	URL() string
	// DataDir is the replica's data directory.
	DataDir() string
	// Kill stops the replica abruptly: SIGKILL for a process; for an
	// in-process replica, its Run context cancelled with a shutdown
	// timeout of a millisecond, so requests in flight are cut off and the
	// store closes under them.
	Kill(t testing.TB)
	// Restart starts a killed replica again on its data directory and
	// address and waits until it serves.
	Restart(t testing.TB)
}

// deployment is one test's system: a three-member etcd cluster and
// leasehold replicas on it sharing a CA and admin credentials.
type deployment struct {
	etcd     *etcdtest.Cluster
	replicas []replica
	// admin is the admin REST config shared by every replica (the first
	// replica's admin.kubeconfig); configFor swaps its server URL.
	admin *rest.Config
}

// startReplicaFunc starts replica i on dataDir and addr, against etcd.
type startReplicaFunc func(t testing.TB, i int, dataDir, addr string, etcd []string) replica

// deploy starts a three-member etcd cluster and n replicas started by
// start, the first one generating the shared credentials.
func deploy(t *testing.T, n int, start startReplicaFunc) *deployment {
	t.Helper()
	d := &deployment{etcd: etcdtest.Start(t, etcdtest.Config{Size: 3})}
	var first string
	for i := range n {
		dir := t.TempDir()
		if i > 0 {
			if err := shareCredentials(first, dir); err != nil {
				t.Fatal(err)
			}
		}
		r := start(t, i, dir, ports.Addr(t), d.etcd.Endpoints())
		if i == 0 {
			first = dir
		}
		d.replicas = append(d.replicas, r)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(first, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = requestTimeout
	d.admin = cfg
	return d
}

// addrs are the replicas' host:port addresses.
func (d *deployment) addrs() []string {
	var out []string
	for _, r := range d.replicas {
		out = append(out, strings.TrimPrefix(r.URL(), "https://"))
	}
	return out
}

// configFor returns the shared admin config pointed at replica i. Each
// config has its own transport (so its own connections), as separate
// client processes would.
func (d *deployment) configFor(i int) *rest.Config {
	cfg := rest.CopyConfig(d.admin)
	cfg.Host = d.replicas[i].URL()
	// A Proxy function keeps client-go from sharing a cached transport.
	cfg.Proxy = noProxy
	return cfg
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// clientFor returns a typed protobuf clientset of replica i.
func (d *deployment) clientFor(t testing.TB, i int) kubernetes.Interface {
	t.Helper()
	cfg := d.configFor(i)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createNamespaces creates namespaces through replica 0.
func createNamespaces(t testing.TB, d *deployment, names ...string) {
	t.Helper()
	c := d.clientFor(t, 0)
	for _, name := range names {
		if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// etcdFollower returns a running etcd member that does not lead.
func (d *deployment) etcdFollower(t testing.TB) *etcdtest.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leader, err := d.etcd.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.etcd.Members {
		if m != leader && m.Running() {
			return m
		}
	}
	t.Fatal("no running etcd follower")
	return nil
}

// etcdLeader returns the etcd leader, waiting for one.
func (d *deployment) etcdLeader(t testing.TB) *etcdtest.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m, err := d.etcd.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// restartEtcd restarts a killed member and waits until it is healthy.
func restartEtcd(t testing.TB, m *etcdtest.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
}

// inProcess is a replica running in the test process (internal/server via
// internal/testkit/testserver).
type inProcess struct {
	name, dir, addr string
	etcd            []string
	// opts are more options of every start.
	opts []testserver.Option

	mu  sync.Mutex // guards srv
	srv *testserver.Server
}

// startInProcess is a startReplicaFunc for in-process replicas.
func startInProcess(t testing.TB, i int, dir, addr string, etcd []string) replica {
	t.Helper()
	r := &inProcess{name: fmt.Sprintf("r%d", i), dir: dir, addr: addr, etcd: etcd}
	r.start(t)
	return r
}

func (r *inProcess) start(t testing.TB) {
	t.Helper()
	opts := append([]testserver.Option{testserver.Etcd(r.etcd, etcdPrefix), func(c *server.Config) {
		c.Listen = r.addr
		c.ShutdownTimeout = time.Millisecond
	}}, r.opts...)
	srv := testserver.StartIn(t, r.dir, opts...)
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

func (r *inProcess) Name() string    { return r.name }
func (r *inProcess) URL() string     { return "https://" + r.addr }
func (r *inProcess) DataDir() string { return r.dir }

func (r *inProcess) Kill(testing.TB) {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	srv.Stop()
}

func (r *inProcess) Restart(t testing.TB) {
	t.Helper()
	r.start(t)
}

// waitUntil polls cond every 20 ms until it holds, failing the test with
// what when timeout passes first.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail returns the last n bytes of a file, for failure reports.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
