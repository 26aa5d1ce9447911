package embedded

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/leasehold/leasehold/internal/storage"
)

// walFaults fails or holds the fsyncs of pebble's write-ahead log: faults
// the tests cannot cause otherwise.
type walFaults struct {
	fail atomic.Bool
	// hold, when set, makes WAL syncs wait until it is closed; each held
	// sync first signals held.
	hold atomic.Pointer[chan struct{}]
	held chan struct{}
}

func newWALFaults() *walFaults { return &walFaults{held: make(chan struct{}, 16)} }

func (f *walFaults) String() string { return "walFaults" }

func (f *walFaults) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if ch := f.hold.Load(); ch != nil {
		f.held <- struct{}{}
		<-*ch
	}
	if f.fail.Load() {
		return errorfs.ErrInjected
	}
	return nil
}

// holdSyncs makes WAL syncs wait until the returned release is called. The
// test's cleanup releases them too, so that a failing test does not leave
// Close waiting on a held fsync.
func (f *walFaults) holdSyncs(t *testing.T) (release func()) {
	ch := make(chan struct{})
	f.hold.Store(&ch)
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.hold.Store(nil)
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

// openFaulty opens a store whose WAL syncs go through faults.
func openFaulty(t *testing.T, dir string, faults *walFaults) *Store {
	t.Helper()
	before := runtime.NumGoroutine()
	s, err := Open(dir, Options{FS: errorfs.Wrap(vfs.Default, faults)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close() // may report the injected failure
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("goroutines leaked: %d before Open, %d after Close", before, n)
		}
	})
	return s
}

// waitVisible polls pebble itself until key is visible there, that is until
// the committer's batch has been applied, while its fsync may still run.
func waitVisible(t *testing.T, s *Store, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, closer, err := s.db.Get([]byte(key))
		if err == nil {
			closer.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never became visible in pebble", key)
		}
		runtime.Gosched()
	}
}

type result struct {
	kv  storage.KeyValue
	err error
}

func goPut(s *Store, key, value string, expected int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		kv, err := s.Put(context.Background(), key, []byte(value), expected)
		ch <- result{kv, err}
	}()
	return ch
}

func goGet(s *Store, key string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		kv, err := s.Get(context.Background(), key)
		ch <- result{kv, err}
	}()
	return ch
}

// notYet checks that nothing arrives on ch for a short while. A negative
// check can only be bounded, never proved: 100ms is plenty for a read that
// would not wait.
func notYet[T any](t *testing.T, what string, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s returned %+v before the commit was durable", what, v)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestReadsWaitForDurability(t *testing.T) {
	faults := newWALFaults()
	s := openFaulty(t, t.TempDir(), faults)
	ctx := t.Context()
	old, err := s.Put(ctx, "/registry/leases/ns/old", []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}

	release := faults.holdSyncs(t)
	put := goPut(s, "/registry/leases/ns/a", "a", 0)
	<-faults.held // the batch is in the WAL, its fsync held
	waitVisible(t, s, "/registry/leases/ns/a")

	get := goGet(s, "/registry/leases/ns/a")
	list := make(chan storage.ListResult, 1)
	go func() {
		res, _ := s.List(context.Background(), "/registry/")
		list <- res
	}()
	notYet(t, "Get of a key being committed", get)
	notYet(t, "List", list)
	notYet(t, "Put", put)
	if rev, _ := s.Revision(ctx); rev != old.ModRevision {
		t.Errorf("Revision during the fsync = %d, want the committed %d", rev, old.ModRevision)
	}

	release()
	p := <-put
	if p.err != nil {
		t.Fatal(p.err)
	}
	if g := <-get; g.err != nil || g.kv.ModRevision != p.kv.ModRevision {
		t.Errorf("Get after the commit = %+v, %v; want the write at %d", g.kv, g.err, p.kv.ModRevision)
	}
	if l := <-list; l.Revision != p.kv.ModRevision || len(l.KVs) != 2 {
		t.Errorf("List after the commit = %d keys at %d, want 2 at %d", len(l.KVs), l.Revision, p.kv.ModRevision)
	}
}

func TestSyncFailureIsFailStop(t *testing.T) {
	dir := t.TempDir()
	faults := newWALFaults()
	s := openFaulty(t, dir, faults)
	ctx := t.Context()
	a, err := s.Put(ctx, "/registry/leases/ns/a", []byte("a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/registry/", a.ModRevision)
	if err != nil {
		t.Fatal(err)
	}

	// Hold the next fsync so that a reader is waiting on it, then fail it.
	release := faults.holdSyncs(t)
	put := goPut(s, "/registry/leases/ns/b", "b", 0)
	<-faults.held
	waitVisible(t, s, "/registry/leases/ns/b")
	get := goGet(s, "/registry/leases/ns/b")
	faults.fail.Store(true)
	release()

	if p := <-put; !errors.Is(p.err, storage.ErrUnavailable) {
		t.Fatalf("Put whose fsync failed: %+v, %v; want ErrUnavailable", p.kv, p.err)
	}
	if g := <-get; !errors.Is(g.err, storage.ErrUnavailable) {
		t.Errorf("Get waiting on the failed commit: %+v, %v; want ErrUnavailable", g.kv, g.err)
	}
	if !errors.Is(s.Err(), storage.ErrUnavailable) {
		t.Errorf("Err() after a failed fsync = %v, want ErrUnavailable", s.Err())
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Error("Done() not closed after a failed fsync")
	}
	for ev := range w.Events() {
		if ev.Type != storage.EventProgress {
			t.Errorf("watch delivered %v %q at %d from a failed commit", ev.Type, ev.KV.Key, ev.Revision)
		}
	}
	if !errors.Is(w.Err(), storage.ErrUnavailable) {
		t.Errorf("watch Err() after a failed fsync = %v, want ErrUnavailable", w.Err())
	}

	// Everything fails from now on, even with the disk healthy again.
	faults.fail.Store(false)
	if _, err := s.Put(ctx, "/registry/leases/ns/c", []byte("c"), 0); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Put after the failure: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, a.Key); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Get after the failure: %v, want ErrUnavailable", err)
	}
	if _, err := s.Revision(ctx); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Revision after the failure: %v, want ErrUnavailable", err)
	}
	s.Close()

	// A restart recovers what was acknowledged.
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after the failure: %v", err)
	}
	defer s2.Close()
	if got, err := s2.Get(ctx, a.Key); err != nil || got.ModRevision != a.ModRevision {
		t.Errorf("acknowledged write after reopen: %+v, %v", got, err)
	}
}

// TestCloseCommitsQueuedWrites closes the store while a commit is held and
// writes are queued behind it: Close must commit and acknowledge them all.
func TestCloseCommitsQueuedWrites(t *testing.T) {
	dir := t.TempDir()
	faults := newWALFaults()
	s := openFaulty(t, dir, faults)
	release := faults.holdSyncs(t)
	first := goPut(s, "/registry/leases/ns/first", "v", 0)
	<-faults.held

	const queued = 10
	var puts []<-chan result
	for i := range queued {
		puts = append(puts, goPut(s, fmt.Sprintf("/registry/leases/ns/q%d", i), "v", 0))
	}
	waitFor(t, "writes to queue", func() bool { return len(s.queue) == queued })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, "Close to refuse new writes", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.closed
	})
	if _, err := s.Put(t.Context(), "/registry/leases/ns/late", []byte("v"), 0); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Put after Close began: %v, want ErrUnavailable", err)
	}
	release()

	for i, ch := range append(puts, first) {
		if r := <-ch; r.err != nil {
			t.Errorf("queued write %d: %v", i, r.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if rev, _ := s2.Revision(t.Context()); rev != queued+1 {
		t.Errorf("revision after reopen = %d, want %d", rev, queued+1)
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}
