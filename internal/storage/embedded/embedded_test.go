package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/testkit/storagetest"
)

// suiteHistory is the history of stores under the conformance suite: large
// enough for its watchers, small enough to overflow quickly in Compact.
const suiteHistory = 2048

func TestConformance(t *testing.T) {
	storagetest.RunTests(t, func(t *testing.T) storage.Interface {
		return open(t, t.TempDir(), embedded.Options{History: suiteHistory})
	}, storagetest.Options{
		MaxValueSize: embedded.DefaultMaxValueSize,
		Compact:      overflowHistory,
	})
}

// overflowHistory pushes rev out of the history by writing suiteHistory
// events outside /registry/.
func overflowHistory(t *testing.T, s storage.Interface, rev int64) {
	t.Helper()
	const writers = 32
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var kv storage.KeyValue
			for range suiteHistory / writers {
				var err error
				if kv, err = s.Put(t.Context(), fmt.Sprintf("/filler/%d", w), []byte("x"), kv.ModRevision); err != nil {
					t.Errorf("filler write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if cur, err := s.Revision(t.Context()); err != nil || cur < rev+suiteHistory {
		t.Fatalf("after filling the history: revision %d, %v; want at least %d", cur, err, rev+suiteHistory)
	}
}

// open opens a store in dir, closes it when the test ends, and then checks
// that the store's goroutines (and pebble's) are gone.
func open(t testing.TB, dir string, opts embedded.Options) *embedded.Store {
	t.Helper()
	before := runtime.NumGoroutine()
	s, err := embedded.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkGoroutines(t, before)
	})
	return s
}

// checkGoroutines waits, up to a deadline, for the goroutine count to drop
// back to what it was before the store opened. Cheap leak detection: the
// suite runs stores one at a time.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines leaked: %d before Open, %d after Close\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		runtime.Gosched()
	}
}

func TestReopenPreservesState(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a1 := mustPut(t, s, "/registry/leases/ns/a", "a1", 0)
	a2 := mustPut(t, s, a1.Key, "a2", a1.ModRevision)
	b := mustPut(t, s, "/registry/leases/ns/b", "b", 0)
	big := mustPut(t, s, "/registry/leases/ns/big", strings.Repeat("x", 1<<20), 0)
	// The newest revision belongs to a delete: only the stored revision
	// remembers it.
	c := mustPut(t, s, "/registry/leases/ns/c", "c", 0)
	if _, err := s.Delete(ctx, c.Key, c.ModRevision); err != nil {
		t.Fatal(err)
	}
	rev, _ := s.Revision(ctx)
	before, err := s.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir, embedded.Options{})
	if got, err := s.Revision(ctx); err != nil || got != rev {
		t.Fatalf("Revision after reopen = %d, %v; want %d", got, err, rev)
	}
	after, err := s.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after, cmp.Comparer(bytes.Equal)); d != "" {
		t.Errorf("List after reopen (-before +after):\n%s", d)
	}
	if len(after.KVs) != 3 || after.Revision != rev {
		t.Errorf("List after reopen: %d keys at %d, want 3 at %d", len(after.KVs), after.Revision, rev)
	}
	for _, kv := range []storage.KeyValue{a2, b, big} {
		got, err := s.Get(ctx, kv.Key)
		if err != nil || got.CreateRevision != kv.CreateRevision || got.ModRevision != kv.ModRevision || !bytes.Equal(got.Value, kv.Value) {
			t.Errorf("Get(%q) after reopen = rev %d/%d, %v; want %d/%d", kv.Key, got.CreateRevision, got.ModRevision, err, kv.CreateRevision, kv.ModRevision)
		}
	}

	// The counter continues; CreateRevision survives the next update.
	a3 := mustPut(t, s, a1.Key, "a3", a2.ModRevision)
	if a3.ModRevision != rev+1 || a3.CreateRevision != a1.CreateRevision {
		t.Errorf("first write after reopen = %d/%d, want %d/%d", a3.CreateRevision, a3.ModRevision, a1.CreateRevision, rev+1)
	}
	// History does not survive: it starts at the reopened revision.
	if _, err := s.Watch(ctx, "/", rev-1); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Watch from before the reopen: %v, want ErrCompacted", err)
	}
	if _, err := s.Watch(ctx, "/", rev); err != nil {
		t.Errorf("Watch from the reopened revision: %v", err)
	}
}

// TestCloseWithWritesInFlight closes the store under write load: every write
// must either succeed (and then survive a reopen) or fail with
// ErrUnavailable (and then be absent).
func TestCloseWithWritesInFlight(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 64
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   = map[string]int64{}
		refused []string
		started = make(chan struct{}, writers)
	)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("/registry/leases/w%d/%d", w, i)
				kv, err := s.Put(context.Background(), key, []byte("v"), 0)
				if i == 0 {
					started <- struct{}{}
				}
				mu.Lock()
				if err == nil {
					acked[key] = kv.ModRevision
				} else {
					refused = append(refused, key)
				}
				mu.Unlock()
				if err != nil {
					if !errors.Is(err, storage.ErrUnavailable) {
						t.Errorf("Put during Close: %v, want ErrUnavailable", err)
					}
					return
				}
			}
		})
	}
	for range writers {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	s = open(t, dir, embedded.Options{})
	ctx := t.Context()
	rev, _ := s.Revision(ctx)
	for key, mod := range acked {
		kv, err := s.Get(ctx, key)
		if err != nil || kv.ModRevision != mod {
			t.Errorf("acknowledged %q at %d: after reopen %+v, %v", key, mod, kv, err)
		}
		if mod > rev {
			t.Errorf("acknowledged revision %d above the reopened revision %d", mod, rev)
		}
	}
	for _, key := range refused {
		if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("refused write %q: after reopen Get = %v, want ErrNotFound", key, err)
		}
	}
	if len(acked) == 0 || len(refused) != writers {
		t.Errorf("%d writes acknowledged, %d refused; want some acknowledged and one refusal per writer (%d)", len(acked), len(refused), writers)
	}
	if int64(len(acked)) != rev {
		t.Errorf("%d writes acknowledged, revision after reopen %d", len(acked), rev)
	}
}

func TestSlowWatcherEndsCompacted(t *testing.T) {
	s := open(t, t.TempDir(), embedded.Options{History: 16})
	ctx := t.Context()
	w, err := s.Watch(ctx, "/registry/", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads: the watcher fills its channel and stops moving while
	// the history moves on far past it.
	var kv storage.KeyValue
	for range 400 {
		kv = mustPut(t, s, "/registry/leases/ns/a", "v", kv.ModRevision)
	}
	var got int64
	for ev := range w.Events() {
		if ev.Type == storage.EventProgress {
			continue
		}
		if ev.Revision != got+1 {
			t.Fatalf("event at %d after %d: gap", ev.Revision, got)
		}
		got = ev.Revision
	}
	if !errors.Is(w.Err(), storage.ErrCompacted) {
		t.Errorf("Err() of a watcher left behind = %v, want ErrCompacted", w.Err())
	}
	if got == 0 || got >= kv.ModRevision {
		t.Errorf("slow watcher delivered up to %d of %d before ending; want some, not all", got, kv.ModRevision)
	}
	// The store is unaffected.
	if _, err := s.Put(ctx, kv.Key, []byte("w"), kv.ModRevision); err != nil {
		t.Errorf("Put after a watcher fell behind: %v", err)
	}
}

func TestHistoryBytesBound(t *testing.T) {
	s := open(t, t.TempDir(), embedded.Options{HistoryBytes: 64 << 10})
	ctx := t.Context()
	start, _ := s.Revision(ctx)
	value := strings.Repeat("x", 10<<10)
	var kv storage.KeyValue
	for range 20 { // ~400 KiB of values and previous values
		kv = mustPut(t, s, "/registry/leases/ns/a", value, kv.ModRevision)
	}
	if _, err := s.Watch(ctx, "/", start); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Watch from the start after exceeding HistoryBytes: %v, want ErrCompacted", err)
	}
	if _, err := s.Watch(ctx, "/", kv.ModRevision-1); err != nil {
		t.Errorf("Watch of the newest event: %v", err)
	}
}

func TestKeySpace(t *testing.T) {
	s := open(t, t.TempDir(), embedded.Options{})
	ctx := t.Context()
	mustPut(t, s, "/a", "1", 0)
	for _, key := range []string{"", "a", "\x00leasehold/revision"} {
		if _, err := s.Put(ctx, key, []byte("x"), 0); err == nil || errors.Is(err, storage.ErrConflict) {
			t.Errorf("Put(%q) = %v, want an invalid key error", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", key, err)
		}
	}
	for prefix, want := range map[string]int{"": 1, "/": 1, "\x00": 0, "\x00leasehold/": 0, "a": 0} {
		res, err := s.List(ctx, prefix)
		if err != nil || len(res.KVs) != want || res.Revision != 1 {
			t.Errorf("List(%q) = %d keys at %d, %v; want %d keys at 1", prefix, len(res.KVs), res.Revision, err, want)
		}
	}
	if _, err := s.Delete(ctx, "/a", 0); err == nil {
		t.Error("Delete with expected revision 0 succeeded")
	}
}

func TestCanceledContext(t *testing.T) {
	s := open(t, t.TempDir(), embedded.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "/a", []byte("x"), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled ctx: %v, want context.Canceled", err)
	}
	if _, err := s.Get(t.Context(), "/a"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after a canceled Put: %v, want ErrNotFound", err)
	}
	if rev, _ := s.Revision(t.Context()); rev != 0 {
		t.Errorf("Revision after a canceled Put = %d, want 0", rev)
	}
}

func TestOpenRefuses(t *testing.T) {
	pebbleWith := func(t *testing.T, key, value string) string {
		dir := t.TempDir()
		db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(db.Set([]byte(key), []byte(value), pebble.Sync), db.Close()); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("other pebble data", func(t *testing.T) {
		if s, err := embedded.Open(pebbleWith(t, "/registry/x", "y"), embedded.Options{}); err == nil {
			s.Close()
			t.Fatal("Open of a pebble database without our format marker succeeded")
		}
	})
	t.Run("unknown format", func(t *testing.T) {
		if s, err := embedded.Open(pebbleWith(t, "\x00leasehold/format", "3"), embedded.Options{}); err == nil {
			s.Close()
			t.Fatal("Open of an unknown format version succeeded")
		}
	})
	t.Run("directory in use", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir, embedded.Options{})
		if s, err := embedded.Open(dir, embedded.Options{}); err == nil {
			s.Close()
			t.Fatal("a second Open of the same directory succeeded")
		}
	})
	t.Run("negative option", func(t *testing.T) {
		if s, err := embedded.Open(t.TempDir(), embedded.Options{History: -1}); err == nil {
			s.Close()
			t.Fatal("Open with a negative option succeeded")
		}
	})
}

func TestCloseIsIdempotent(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Fatalf("Err() of an open store = %v", s.Err())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !errors.Is(s.Err(), storage.ErrUnavailable) {
		t.Errorf("Err() after Close = %v, want ErrUnavailable", s.Err())
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done() not closed after Close")
	}
}

func mustPut(t testing.TB, s storage.Interface, key, value string, expected int64) storage.KeyValue {
	t.Helper()
	kv, err := s.Put(context.Background(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Put(%q, %d): %v", key, expected, err)
	}
	return kv
}

// BenchmarkPut measures durable updates (each one fsync'd, shared through
// group commit) with 1, 16 and 128 concurrent writers. Each writer updates
// its own keys, so writes never conflict; values are 500 bytes, about a
// Lease. One writer runs a plain loop; the others use RunParallel with
// SetParallelism(writers/GOMAXPROCS), so the count is rounded to a multiple
// of GOMAXPROCS and the sub-benchmark is named by the real count.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("v"), 500)
	writer := func(b *testing.B, s *embedded.Store, id int64, next func() bool) {
		var kvs [8]storage.KeyValue
		for i := 0; next(); i++ {
			slot := i % len(kvs)
			kv, err := s.Put(context.Background(), fmt.Sprintf("/registry/leases/w%d/%d", id, slot), value, kvs[slot].ModRevision)
			if err != nil {
				b.Error(err)
				return
			}
			kvs[slot] = kv
		}
	}
	b.Run("writers=1", func(b *testing.B) {
		s := open(b, b.TempDir(), embedded.Options{})
		b.ReportAllocs()
		writer(b, s, 0, b.Loop)
	})
	procs := runtime.GOMAXPROCS(0)
	for _, want := range []int{16, 128} {
		p := max(1, want/procs)
		b.Run(fmt.Sprintf("writers=%d", p*procs), func(b *testing.B) {
			s := open(b, b.TempDir(), embedded.Options{})
			var ids atomic.Int64
			b.SetParallelism(p)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				writer(b, s, ids.Add(1), pb.Next)
			})
		})
	}
}

// BenchmarkGet measures point reads of 10k stored keys from all CPUs.
func BenchmarkGet(b *testing.B) {
	const keys = 10000
	s := open(b, b.TempDir(), embedded.Options{})
	value := bytes.Repeat([]byte("v"), 500)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < keys; i += 16 {
				if _, err := s.Put(context.Background(), fmt.Sprintf("/registry/leases/ns/%05d", i), value, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, err := s.Get(context.Background(), fmt.Sprintf("/registry/leases/ns/%05d", (i*7919)%keys)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// quietLogger keeps pebble opened directly by tests from logging.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
