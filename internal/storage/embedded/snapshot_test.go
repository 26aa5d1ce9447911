package embedded_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// TestSnapshotRestore: a restored store holds every key with its value and
// revisions (expiries included), at the snapshot's revision plus the bump,
// and a watch from before that revision ends compacted.
func TestSnapshotRestore(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), embedded.Options{})
	var doomed storage.KeyValue
	for i := range 100 {
		kv := mustPut(t, s, fmt.Sprintf("/registry/leases/default/l%03d", i), fmt.Sprintf("v%d", i), 0)
		if i == 50 {
			doomed = kv
		}
	}
	if _, err := s.Put(ctx, "/registry/events/default/e", []byte("event"), 0, storage.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	kv, err := s.Delete(ctx, doomed.Key, doomed.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	info, err := s.Snapshot(ctx, &buf)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if info.Revision != kv.ModRevision || info.Bytes != int64(buf.Len()) {
		t.Errorf("Snapshot = revision %d, %d bytes; want %d, %d", info.Revision, info.Bytes, kv.ModRevision, buf.Len())
	}
	checked, err := embedded.CheckSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil || checked != info {
		t.Fatalf("CheckSnapshot = %+v, %v; want %+v", checked, err, info)
	}

	for _, bump := range []int64{0, 1000} {
		t.Run(fmt.Sprintf("bump=%d", bump), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if _, err := embedded.Restore(bytes.NewReader(buf.Bytes()), dir, embedded.RestoreOptions{BumpRevision: bump}); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			r := open(t, dir, embedded.Options{})
			got, err := r.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != info.Revision+bump {
				t.Errorf("restored revision %d, want %d", got.Revision, info.Revision+bump)
			}
			if diff := cmp.Diff(want.KVs, got.KVs); diff != "" {
				t.Errorf("restored keys (-saved +restored):\n%s", diff)
			}
			w, err := r.Watch(ctx, "/registry/", info.Revision-1)
			if err == nil {
				_, open := <-w.Events()
				err = w.Err()
				if open {
					t.Errorf("a watch from before the restore got an event")
				}
			}
			if !errors.Is(err, storage.ErrCompacted) {
				t.Errorf("watch from revision %d: %v, want ErrCompacted", info.Revision-1, err)
			}
			next := mustPut(t, r, "/registry/leases/default/new", "x", 0)
			if next.ModRevision != info.Revision+bump+1 {
				t.Errorf("first write after restore at revision %d, want %d", next.ModRevision, info.Revision+bump+1)
			}
		})
	}
}

// TestRestoreRefusesBadSnapshots: a truncated or corrupt snapshot is
// refused with ErrBadSnapshot, and Restore leaves nothing behind.
func TestRestoreRefusesBadSnapshots(t *testing.T) {
	s := open(t, t.TempDir(), embedded.Options{})
	for i := range 50 {
		mustPut(t, s, fmt.Sprintf("/registry/leases/default/l%02d", i), "value", 0)
	}
	var buf bytes.Buffer
	if _, err := s.Snapshot(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"header only":     good[:25],
		"truncated":       good[:len(good)/2],
		"no checksum":     good[:len(good)-32],
		"short checksum":  good[:len(good)-1],
		"byte flipped":    flip(len(good) / 2),
		"checksum wrong":  flip(len(good) - 1),
		"magic wrong":     flip(0),
		"trailing bytes":  append(bytes.Clone(good), 0),
		"another version": append([]byte("leasehold-snapshot\n\x02"), good[20:]...),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := embedded.CheckSnapshot(bytes.NewReader(b)); !errors.Is(err, embedded.ErrBadSnapshot) {
				t.Errorf("CheckSnapshot: %v, want ErrBadSnapshot", err)
			}
			parent := t.TempDir()
			_, err := embedded.Restore(bytes.NewReader(b), filepath.Join(parent, "data"), embedded.RestoreOptions{})
			if !errors.Is(err, embedded.ErrBadSnapshot) {
				t.Errorf("Restore: %v, want ErrBadSnapshot", err)
			}
			if left, _ := os.ReadDir(parent); len(left) > 0 {
				t.Errorf("Restore left %v behind", left)
			}
		})
	}
	t.Run("existing dir", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := embedded.Restore(bytes.NewReader(good), dir, embedded.RestoreOptions{}); !errors.Is(err, os.ErrExist) {
			t.Errorf("Restore into an existing directory: %v, want ErrExist", err)
		}
	})
}

// TestSnapshotUnderWrites: a snapshot taken while writers write holds
// exactly the writes at or below its revision, and writes go on while it
// streams.
func TestSnapshotUnderWrites(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), embedded.Options{})
	const writers = 16
	var (
		mu    sync.Mutex
		acked = map[string][]int64{} // key → acknowledged revisions, in order
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("/registry/leases/default/w%02d", w)
			var last int64
			for !stop.Load() {
				kv, err := s.Put(ctx, key, []byte(fmt.Sprint(last)), last)
				if err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				last = kv.ModRevision
				mu.Lock()
				acked[key] = append(acked[key], last)
				mu.Unlock()
			}
		})
	}
	for {
		if rev, _ := s.Revision(ctx); rev > 200 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var buf bytes.Buffer
	info, err := s.Snapshot(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// Some writes after the snapshot, however slow the machine.
	for {
		if rev, _ := s.Revision(ctx); rev > info.Revision+writers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	dir := filepath.Join(t.TempDir(), "data")
	if _, err := embedded.Restore(&buf, dir, embedded.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir, embedded.Options{})
	got, err := r.List(ctx, "/registry/")
	if err != nil {
		t.Fatal(err)
	}
	restored := map[string]int64{}
	for _, kv := range got.KVs {
		restored[kv.Key] = kv.ModRevision
	}
	after := 0
	for key, revs := range acked {
		var want int64
		for _, rev := range revs {
			if rev <= info.Revision {
				want = rev
			} else {
				after++
			}
		}
		if restored[key] != want {
			t.Errorf("%s restored at revision %d, want %d (the last acknowledged at or below %d)", key, restored[key], want, info.Revision)
		}
	}
	if after == 0 {
		t.Errorf("no write after the snapshot's revision %d: the test proves nothing", info.Revision)
	}
}

// blockingWriter holds its first write until the store stops serving.
type blockingWriter struct {
	store   *embedded.Store
	started chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		close(w.started)
		<-w.store.Done()
	})
	return len(p), nil
}

// TestCloseStopsSnapshot: Close stops a running snapshot, with an error
// wrapping storage.ErrUnavailable, instead of waiting for its end.
func TestCloseStopsSnapshot(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	value := string(bytes.Repeat([]byte("v"), 300))
	for i := range 3000 {
		mustPut(t, s, fmt.Sprintf("/registry/leases/default/l%04d", i), value, 0)
	}
	w := &blockingWriter{store: s, started: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Snapshot(t.Context(), w)
		done <- err
	}()
	<-w.started
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Snapshot after Close: %v, want ErrUnavailable", err)
	}
}
