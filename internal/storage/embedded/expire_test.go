package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// clock is a settable clock for Options.Now.
type clock struct{ nanos atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.nanos.Store(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.nanos.Load()) }
func (c *clock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// waitGone waits, within a deadline, for the reaper (which looks every
// second) to delete key.
func waitGone(t *testing.T, s storage.Interface, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Get(t.Context(), key)
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q has not expired", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Only what is due expires: keys due later stay, however many.
func TestExpiryDeletesWhatIsDue(t *testing.T) {
	c := newClock()
	s := open(t, t.TempDir(), embedded.Options{Now: c.now})
	for i := range 2000 {
		if _, err := s.Put(t.Context(), fmt.Sprintf("/registry/events/ns/later-%04d", i), []byte("x"), 0, storage.WithTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	soon, err := s.Put(t.Context(), "/registry/events/ns/soon", []byte("x"), 0, storage.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(t.Context(), "/registry/events/", soon.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	c.advance(time.Minute)
	waitGone(t, s, soon.Key)
	ev := <-w.Events()
	if ev.Type != storage.EventDelete || ev.KV.Key != soon.Key || ev.Revision != soon.ModRevision+1 {
		t.Errorf("event %v %q at %d, want the expiry of %q at %d", ev.Type, ev.KV.Key, ev.Revision, soon.Key, soon.ModRevision+1)
	}
	if l, err := s.List(t.Context(), "/registry/events/"); err != nil || len(l.KVs) != 2000 {
		t.Fatalf("after the expiry: %d keys, %v; want the 2000 due later", len(l.KVs), err)
	}
	c.advance(time.Hour)
	waitGone(t, s, "/registry/events/ns/later-1999")
	if l, err := s.List(t.Context(), "/registry/events/"); err != nil || len(l.KVs) != 0 {
		t.Fatalf("an hour later: %d keys, %v", len(l.KVs), err)
	}
}

// Expiries are on disk: a key due while the store was closed is deleted
// once it opens again.
func TestExpirySurvivesReopen(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Put(t.Context(), "/registry/events/ns/a", []byte("a"), 0, storage.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	kept := mustPut(t, s, "/registry/events/ns/kept", "k", 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Minute)
	s = open(t, dir, embedded.Options{Now: c.now})
	waitGone(t, s, kv.Key)
	if got, err := s.Get(t.Context(), kept.Key); err != nil || got.ModRevision != kept.ModRevision {
		t.Errorf("the key without TTL after the reopen: %v, %v", got, err)
	}
}

// A store of format 1 (no expiries) opens, keeps its data, and is marked
// as format 2.
func TestOpenUpgradesFormat1(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	// Format 1's layout: the marker, the revision (uvarint 5) and a record
	// (uvarint create 4, uvarint mod 5, the value).
	for k, v := range map[string]string{"\x00leasehold/format": "1", "\x00leasehold/revision": "\x05", "/registry/leases/ns/a": "\x04\x05value"} {
		if err := b.Set([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(b.Commit(pebble.Sync), db.Close()); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Get(context.Background(), "/registry/leases/ns/a")
	if err != nil || string(kv.Value) != "value" || kv.CreateRevision != 4 || kv.ModRevision != 5 {
		t.Errorf("Get after the upgrade: %+v, %v", kv, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, closer, err := db.Get([]byte("\x00leasehold/format"))
	if err != nil || string(v) != "2" {
		t.Errorf("format marker %q, %v; want 2", v, err)
	}
	if closer != nil {
		closer.Close()
	}
}

// After a burst of expiries the store compacts itself: what the expired
// keys took on disk goes, and not only once later writes get to it.
func TestExpiredBurstIsCompacted(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	s := open(t, dir, embedded.Options{Now: c.now})
	const keys, writers = 12000, 32 // more than compactAfterExpiries, and than a memtable holds
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := w; i < keys; i += writers {
				value := make([]byte, 1024) // random: pebble compresses tables
				for j := range value {
					value[j] = byte(r.Uint32())
				}
				if _, err := s.Put(t.Context(), fmt.Sprintf("/registry/events/ns/e-%05d", i), value, 0, storage.WithTTL(time.Minute)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := tableBytes(t, dir); got < 4<<20 {
		t.Fatalf("%d bytes of tables after writing %d KiB: the test needs them on disk", got, keys)
	}
	c.advance(time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := tableBytes(t, dir)
		if got < 256<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of tables 30 s after every key expired", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l, err := s.List(t.Context(), "/registry/events/"); err != nil || len(l.KVs) != 0 {
		t.Fatalf("%d keys left, %v", len(l.KVs), err)
	}
}

// tableBytes is the size of pebble's tables in dir.
func tableBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".sst") {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
