package disk

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"

	"github.com/leasehold/leasehold/internal/testkit/testbin"
)

// process is a real leasehold process.
type process struct {
	cmd    *exec.Cmd
	config *rest.Config
	// log collects its output.
	log *syncBuffer
}

// startProcess runs leasehold serve on dataDir and addr with extra flags
// and waits until it serves.
func startProcess(t *testing.T, dataDir, addr string, flags ...string) *process {
	t.Helper()
	bin, err := testbin.Build(testbin.Leasehold)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", dataDir, "--listen", addr}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, log: &syncBuffer{}}
	t.Cleanup(p.kill)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			p.log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "leasehold is serving") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("leasehold did not become ready; its log:\n%s", p.log)
	}
	p.config, err = clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	p.config.QPS, p.config.Burst = -1, 0
	p.config.Timeout = 30 * time.Second
	return p
}

// kill sends SIGKILL and waits; safe to call twice.
func (p *process) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// inProcess is a server run by the test, whose Run result the test sees.
type inProcess struct {
	*server.Server
	config *rest.Config
	cancel context.CancelFunc
	done   chan error
}

// startInProcess starts a server on dataDir with cfg's storage settings.
func startInProcess(t *testing.T, dataDir string, opts ...testserver.Option) *inProcess {
	t.Helper()
	cfg := server.Config{
		DataDir:                   dataDir,
		Listen:                    "127.0.0.1:0",
		CoordinatedLeaderElection: true,
		Logger:                    testserver.Logger(),
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
	s := &inProcess{Server: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-s.done:
		t.Fatalf("server stopped before ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready after 30s")
	}
	t.Cleanup(func() { s.stop() })
	s.config, err = clientcmd.BuildConfigFromFlags("", srv.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	s.config.QPS, s.config.Burst = -1, 0
	return s
}

// stop stops the server and returns what Run returned; safe to call
// after the server stopped by itself.
func (s *inProcess) stop() error {
	s.cancel()
	err := <-s.done
	s.done <- err
	return err
}

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// randomAnnotation is n bytes that do not compress, so that the store's
// files grow by about as much.
func randomAnnotation(n int) string {
	b := make([]byte, n*3/4)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func lease(name, holder string, annotation string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	if annotation != "" {
		l.Annotations = map[string]string{"fill": annotation}
	}
	return l
}

// acked records acknowledged writes: the holder of each lease whose
// last write was acknowledged, and the leases whose delete was.
type acked struct {
	mu      sync.Mutex
	holders map[string]string
	deleted map[string]bool
	// unsure are leases with a write whose outcome is unknown: checked
	// only for being one of the values tried.
	unsure map[string][]string
}

func newAcked() *acked {
	return &acked{holders: map[string]string{}, deleted: map[string]bool{}, unsure: map[string][]string{}}
}

func (a *acked) put(name, holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holders[name] = holder
	delete(a.deleted, name)
	delete(a.unsure, name)
}

func (a *acked) del(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.holders, name)
	a.deleted[name] = true
	delete(a.unsure, name)
}

// tried records a write of holder to name whose outcome is unknown.
func (a *acked) tried(name, holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unsure[name] = append(a.unsure[name], holder)
}

// check lists the leases and compares them with what was acknowledged.
func (a *acked) check(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	list, err := c.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range list.Items {
		got[l.Name] = *l.Spec.HolderIdentity
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.holders) == 0 {
		t.Fatal("nothing was acknowledged: the check proves nothing")
	}
	for name, holder := range a.holders {
		g, ok := got[name]
		switch {
		case ok && g == holder:
		case len(a.unsure[name]) > 0 && (!ok || contains(a.unsure[name], g)):
		default:
			t.Errorf("%s: holder %q (present %v), acknowledged %q", name, g, ok, holder)
		}
	}
	for name := range a.deleted {
		if g, ok := got[name]; ok && !contains(a.unsure[name], g) {
			t.Errorf("%s: acknowledged delete lost: holder %q", name, g)
		}
	}
	t.Logf("%d acknowledged leases and %d acknowledged deletes checked", len(a.holders), len(a.deleted))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// wantNoSpace checks that err is kube-apiserver's answer to etcd's
// "database space exceeded": a 500 Status without a reason.
func wantNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != 500 || se.ErrStatus.Reason != metav1.StatusReasonUnknown ||
		!strings.HasPrefix(se.ErrStatus.Message, "database space exceeded: ") {
		t.Fatalf("%s: %v (%#v), want a 500 Status \"database space exceeded: ...\" without a reason", what, err, se)
	}
}

// health GETs a health endpoint with the admin credentials.
func health(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func ptr[T any](v T) *T { return &v }

// waitEvent reads w until an event of type typ for name arrives.
func waitEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended while waiting for %s %s", typ, name)
			}
			if m, err := apimeta.Accessor(ev.Object); err == nil && ev.Type == typ && m.GetName() == name {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for %s on the watch", typ, name)
		}
	}
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		code, body := health(t, cfg, "/readyz")
		if code == 200 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("/readyz: %d %q", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
