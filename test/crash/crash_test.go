// Package crash kills a real leasehold process with SIGKILL in the middle
// of a concurrent write load, restarts it on the same data directory and
// checks that every acknowledged write survived and the store is
// consistent.
package crash

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/testkit/ports"
	"github.com/leasehold/leasehold/internal/testkit/testbin"
)

type process struct {
	cmd    *exec.Cmd
	client kubernetes.Interface
}

// start runs leasehold on dataDir and addr and waits until it answers.
func start(t *testing.T, dataDir, addr string) *process {
	t.Helper()
	bin, err := testbin.Build(testbin.Leasehold)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", addr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "leasehold is serving") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("leasehold did not become ready")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &process{cmd: cmd, client: c}
}

func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// terminate sends SIGTERM and returns the exit error (nil for status 0).
func (p *process) terminate() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.cmd.Wait()
}

// keyState is what the load knows about one lease: the last sequence number
// acknowledged, and the highest one attempted (which may or may not have
// been applied when the process died).
type keyState struct {
	acked, attempted int
	exists           bool // the create was acknowledged
	deleted          bool // the delete was acknowledged
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	dataDir := t.TempDir()
	addr := ports.Addr(t)
	p := start(t, dataDir, addr)

	const workers, keysPerWorker = 16, 8
	states := make([][]keyState, workers)
	for i := range states {
		states[i] = make([]keyState, keysPerWorker)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = load(ctx, p.client, w, states[w])
		}()
	}
	// Let the load run, then kill the process in the middle of it.
	time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
	p.kill()
	stop()
	wg.Wait()

	p = start(t, dataDir, addr)
	defer p.kill()
	check(t, p.client, states)
}

func TestGracefulShutdownOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and stops a real process")
	}
	dataDir := t.TempDir()
	addr := ports.Addr(t)
	p := start(t, dataDir, addr)

	const workers, keysPerWorker = 16, 8
	states := make([][]keyState, workers)
	for i := range states {
		states[i] = make([]keyState, keysPerWorker)
	}
	var serverErrs sync.Map
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := load(ctx, p.client, w, states[w]); err != nil && apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
				// An API error (a Status) during shutdown means a request
				// was answered badly instead of finishing or being refused.
				serverErrs.Store(w, err)
			}
		}()
	}
	time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
	if err := p.terminate(); err != nil {
		t.Fatalf("leasehold exited with %v after SIGTERM, want status 0", err)
	}
	stop()
	wg.Wait()
	serverErrs.Range(func(k, v any) bool {
		t.Errorf("worker %v: %v", k, v)
		return true
	})
	p = start(t, dataDir, addr)
	defer p.kill()
	check(t, p.client, states)
}

func leaseName(w, k int) string { return fmt.Sprintf("w%02d-k%02d", w, k) }

// load creates, updates and deletes the worker's leases until ctx ends or
// the server goes away. Each update writes a sequence number into
// holderIdentity.
func load(ctx context.Context, c kubernetes.Interface, w int, states []keyState) error {
	leases := c.CoordinationV1().Leases("default")
	seq := 0
	for ctx.Err() == nil {
		k := rand.IntN(len(states))
		st := &states[k]
		name := leaseName(w, k)
		seq++
		switch {
		case !st.exists || st.deleted:
			st.attempted = seq
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(strconv.Itoa(seq))}}
			if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// An earlier unacknowledged create or delete-undo
					// landed; learn the current state.
					st.exists, st.deleted = true, false
					continue
				}
				return err
			}
			st.acked, st.exists, st.deleted = seq, true, false
		case rand.IntN(10) == 0:
			st.attempted = -seq // a delete
			if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			st.acked, st.deleted = -seq, true
		default:
			cur, err := leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				st.deleted = true
				continue
			}
			if err != nil {
				return err
			}
			cur.Spec.HolderIdentity = ptr(strconv.Itoa(seq))
			st.attempted = seq
			if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
			st.acked = seq
		}
	}
	return nil
}

func check(t *testing.T, c kubernetes.Interface, states [][]keyState) {
	t.Helper()
	ctx := t.Context()
	list, err := c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listRV, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	got := map[string]coordinationv1.Lease{}
	seen := map[string]bool{}
	for _, l := range list.Items {
		got[l.Name] = l
		rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		if err != nil || rv <= 0 || rv > listRV {
			t.Errorf("%s: resourceVersion %q outside (0, %d]", l.Name, l.ResourceVersion, listRV)
		}
		if seen[l.ResourceVersion] {
			t.Errorf("resourceVersion %s used twice", l.ResourceVersion)
		}
		seen[l.ResourceVersion] = true
	}
	acked := 0
	for w, ks := range states {
		for k, st := range ks {
			name := leaseName(w, k)
			l, present := got[name]
			switch {
			case st.acked == 0:
				// Nothing acknowledged: anything goes.
			case st.acked < 0:
				acked++
				// An acknowledged delete: gone, unless a later create was
				// attempted (and maybe applied).
				if present && st.attempted == st.acked {
					t.Errorf("%s: acknowledged delete (seq %d) lost: %+v", name, -st.acked, l.Spec)
				}
			default:
				acked++
				if !present {
					if st.attempted >= 0 {
						t.Errorf("%s: acknowledged write seq %d lost: object missing", name, st.acked)
					}
					continue
				}
				v, _ := strconv.Atoi(*l.Spec.HolderIdentity)
				hi := st.attempted
				if hi < 0 {
					hi = -hi
				}
				if v < st.acked || v > hi {
					t.Errorf("%s: holds seq %d, acknowledged %d, attempted %d", name, v, st.acked, st.attempted)
				}
			}
		}
	}
	if acked == 0 {
		t.Fatal("no write was acknowledged before the kill; the test proved nothing")
	}
	// The store still takes writes, with larger resourceVersions.
	l, err := c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv, _ := strconv.ParseInt(l.ResourceVersion, 10, 64); rv <= listRV {
		t.Errorf("resourceVersion after restart %d not above %d", rv, listRV)
	}
	t.Logf("%d keys with acknowledged writes checked", acked)
}

func ptr[T any](v T) *T { return &v }
