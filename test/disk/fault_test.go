package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/server"
)

// diskFaults injects what a failing or slow disk does, into the files of
// pebble's write-ahead log (*.log) and tables (*.sst): faults a test
// cannot cause on a real disk. The MANIFEST is spared: pebble treats a
// failure to write it as fatal on its own goroutines, which would end
// the test binary (in production it ends the process, as intended).
type diskFaults struct {
	walSyncEIO, walWriteEIO, tableWriteEIO atomic.Bool
	// stall, when set, holds every WAL sync until it is closed.
	stall atomic.Pointer[chan struct{}]
}

func (f *diskFaults) String() string { return "diskFaults" }

func (f *diskFaults) MaybeError(op errorfs.Op) error {
	wal, table := strings.HasSuffix(op.Path, ".log"), strings.HasSuffix(op.Path, ".sst")
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if !wal {
			return nil
		}
		if ch := f.stall.Load(); ch != nil {
			<-*ch
		}
		if f.walSyncEIO.Load() {
			return &fs.PathError{Op: "fsync", Path: op.Path, Err: syscall.EIO}
		}
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		if wal && f.walWriteEIO.Load() || table && f.tableWriteEIO.Load() {
			return &fs.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
		}
	}
	return nil
}

// holdSyncs holds WAL syncs until the returned release is called (also at
// the end of the test).
func (f *diskFaults) holdSyncs(t *testing.T) (release func()) {
	ch := make(chan struct{})
	f.stall.Store(&ch)
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.stall.Store(nil)
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

func faultyDisk(f *diskFaults) func(*server.Config) {
	return func(c *server.Config) { c.StorageFS = errorfs.Wrap(vfs.Default, f) }
}

// createRaw creates a lease in one request, without client-go's retries,
// so that the test sees the first answer.
func createRaw(ctx context.Context, c kubernetes.Interface, l *coordinationv1.Lease, params ...string) error {
	req := c.CoordinationV1().RESTClient().Post().Namespace("default").Resource("leases").
		VersionedParams(&metav1.CreateOptions{}, scheme.ParameterCodec).Body(l).MaxRetries(0)
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	return req.Do(ctx).Error()
}

// TestIOFault: a write or fsync error of the write-ahead log, or a write
// error while pebble flushes a table, on a disk with room. The write that
// met it is not acknowledged; the writes after it are refused at once,
// never left waiting; the server stops by itself, promptly (so that its
// supervisor restarts it); and after a restart every acknowledged write
// is there.
func TestIOFault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*diskFaults)
		// big writes enough to make pebble flush a table.
		big bool
	}{
		{"WAL fsync error", func(f *diskFaults) { f.walSyncEIO.Store(true) }, false},
		{"WAL write error", func(f *diskFaults) { f.walWriteEIO.Store(true) }, false},
		{"table write error", func(f *diskFaults) { f.tableWriteEIO.Store(true) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			faults := &diskFaults{}
			s := startInProcess(t, dir, faultyDisk(faults))
			c := clientset(t, s.config)
			leases := c.CoordinationV1().Leases("default")
			ctx := t.Context()
			ack := newAcked()
			for i := range 20 {
				name := fmt.Sprintf("before-%02d", i)
				if _, err := leases.Create(ctx, lease(name, "h0", ""), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				ack.put(name, "h0")
			}

			tc.inject(faults)
			fill := ""
			if tc.big {
				fill = randomAnnotation(200 << 10)
			}
			// Write until a write fails: at once for the WAL's faults,
			// at the first flush for the tables'.
			var failed error
			for i := 0; i < 200 && failed == nil; i++ {
				name := fmt.Sprintf("during-%03d", i)
				ack.tried(name, "h1")
				if failed = createRaw(ctx, c, lease(name, "h1", fill)); failed == nil {
					ack.put(name, "h1")
				}
			}
			if failed == nil {
				t.Fatal("no write failed")
			}
			t.Logf("the failed write: %v", failed)
			if !apierrors.IsServerTimeout(failed) && !isConnectionError(failed) {
				t.Errorf("the write that met the fault: %v, want a 500 ServerTimeout (or, once the server has stopped, no connection)", failed)
			}
			// Later writes are refused at once (or find the server gone),
			// never left waiting for their deadline.
			lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			ack.tried("later", "h1")
			if err := createRaw(lctx, c, lease("later", "h1", "")); err == nil || errors.Is(err, context.DeadlineExceeded) || lctx.Err() != nil {
				t.Errorf("a write after the fault: %v, want a refusal", err)
			}

			select {
			case err := <-s.done:
				s.done <- err
				if err == nil || !strings.Contains(err.Error(), "storage failed") {
					t.Errorf("the server stopped with %v, want a storage failure", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the server did not stop after the fault")
			}

			s = startInProcess(t, dir)
			ack.check(t, clientset(t, s.config))
		})
	}
}

// isConnectionError reports whether err is a failure to reach the server.
func isConnectionError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "connection reset") ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "server closed")
}

// TestSlowDisk holds the write-ahead log's fsyncs for seconds: a write
// answers 504 at its deadline; gets, lists and watches are served
// meanwhile; a leader-election holder sees its renewals fail and steps
// down, rather than hang; once the disk is back, so is everything, and no
// acknowledged write is lost.
func TestSlowDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	faults := &diskFaults{}
	s := startInProcess(t, dir, faultyDisk(faults))
	c := clientset(t, s.config)
	leases := c.CoordinationV1().Leases("default")
	ctx := t.Context()
	ack := newAcked()
	for i := range 10 {
		name := fmt.Sprintf("before-%02d", i)
		if _, err := leases.Create(ctx, lease(name, "h0", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ack.put(name, "h0")
	}
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// A leader, renewing every 200 ms, giving up after 1 s without a
	// renewal.
	elected, stopped := make(chan struct{}), make(chan struct{})
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "default", "leader", c.CoreV1(), c.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "candidate"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() { close(stopped) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	lectx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	go le.Run(lectx)
	select {
	case <-elected:
	case <-time.After(10 * time.Second):
		t.Fatal("never elected")
	}

	release := faults.holdSyncs(t)
	// A write with a 1 s deadline answers 504 (kube-apiserver's words).
	ack.tried("slow", "h1")
	err = createRaw(ctx, c, lease("slow", "h1", ""), "timeout", "1s")
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != 504 || se.ErrStatus.Reason != metav1.StatusReasonTimeout {
		t.Errorf("a write with a 1 s timeout on a stalled disk: %v, want a 504 Timeout", err)
	}
	// Reads are served from the cache meanwhile, consistent ones too.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := leases.Get(rctx, "before-00", metav1.GetOptions{}); err != nil {
		t.Errorf("get on a stalled disk: %v", err)
	}
	if list, err := leases.List(rctx, metav1.ListOptions{}); err != nil || len(list.Items) < 10 {
		t.Errorf("list on a stalled disk: %d items, %v", len(list.Items), err)
	}
	if code, body := health(t, s.config, "/readyz"); code != 200 {
		t.Errorf("/readyz on a stalled disk: %d %q", code, body)
	}
	// The leader's renewals fail within their deadline: it steps down.
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the leader neither renewed nor stepped down while the disk stalled")
	}

	release()
	if _, err := leases.Create(ctx, lease("after", "h2", ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write once the disk is back: %v", err)
	}
	ack.put("after", "h2")
	waitEvent(t, w, watch.Added, "after")
	s.stop()
	s = startInProcess(t, dir)
	ack.check(t, clientset(t, s.config))
}
