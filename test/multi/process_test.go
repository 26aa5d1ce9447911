package multi

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/testkit/etcdtest"

	"github.com/leasehold/leasehold/internal/testkit/testbin"
)

// process is a replica running as a real leasehold process, started as an
// operator would: leasehold serve --storage etcd.
type process struct {
	name, dir, addr string
	etcd            []string
	log             string // the process's stderr, across restarts

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd
	exited <-chan struct{} // closed when the process has exited
}

// startProcess is a startReplicaFunc for real processes.
func startProcess(t testing.TB, i int, dir, addr string, etcd []string) replica {
	t.Helper()
	p := &process{name: fmt.Sprintf("r%d", i), dir: dir, addr: addr, etcd: etcd, log: filepath.Join(dir, "leasehold.log")}
	t.Cleanup(func() {
		p.Kill(t)
		if t.Failed() {
			t.Logf("end of replica %s's log (%s):\n%s", p.name, p.log, logTail(p.log, 4<<10))
		}
	})
	p.Restart(t)
	return p
}

func (p *process) Name() string    { return p.name }
func (p *process) URL() string     { return "https://" + p.addr }
func (p *process) DataDir() string { return p.dir }

// Restart starts the process and waits until /readyz answers ok.
func (p *process) Restart(t testing.TB) {
	t.Helper()
	bin, err := testbin.Build(testbin.Leasehold)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve",
		"--data-dir", p.dir,
		"--listen", p.addr,
		"--storage", "etcd",
		"--etcd-servers", strings.Join(p.etcd, ","),
		"--etcd-prefix", etcdPrefix,
		"--etcd-compaction-interval", "0", // keep the history the checks read
	)
	exited, err := etcdtest.StartProcess(cmd, p.log)
	if err != nil {
		t.Fatalf("starting %s: %v", p.name, err)
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	if err := p.waitReady(t.Context()); err != nil {
		t.Fatalf("replica %s: %v\n%s", p.name, err, logTail(p.log, 4<<10))
	}
}

// waitReady polls /readyz with the replica's admin credentials (written
// before it serves) until it answers 200, the process exits, or
// readyTimeout passes.
func (p *process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	var hc *http.Client
	var last error
	for {
		if hc == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "admin.kubeconfig"))
			if err == nil {
				cfg.Host = p.URL()
				cfg.Timeout = time.Second
				hc, err = rest.HTTPClientFor(cfg)
			}
			last = err
		}
		if hc != nil {
			last = p.ready(ctx, hc)
			if last == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %v (%w)", last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *process) ready(ctx context.Context, hc *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to exit; killing a stopped
// process does nothing.
func (p *process) Kill(testing.TB) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}
