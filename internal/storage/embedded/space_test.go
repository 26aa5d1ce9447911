package embedded

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasehold/leasehold/internal/storage"
)

// freeSpaceFS reports a chosen free space for the filesystem: an exact
// amount of free space, which a real filesystem gives only roughly. The
// tests on a real full filesystem are in test/disk.
type freeSpaceFS struct {
	vfs.FS
	free atomic.Int64
}

func (fs *freeSpaceFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	du, err := fs.FS.GetDiskUsage(path)
	du.AvailBytes = uint64(fs.free.Load())
	return du, err
}

func openSpace(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// wantNoSpace checks that err is a refusal for lack of space whose message
// mentions what.
func wantNoSpace(t *testing.T, what string, err error, mention string) {
	t.Helper()
	var ns *storage.NoSpaceError
	if !errors.Is(err, storage.ErrNoSpace) || !errors.As(err, &ns) || !strings.Contains(ns.Message, mention) {
		t.Fatalf("%s: %v, want a NoSpaceError mentioning %q", what, err, mention)
	}
}

func TestQuota(t *testing.T) {
	dir := t.TempDir()
	const quota = 4000
	s := openSpace(t, dir, Options{QuotaBytes: quota})
	ctx := t.Context()
	value := strings.Repeat("v", 1000)
	var kvs []storage.KeyValue
	for i := 0; ; i++ {
		kv, err := s.Put(ctx, fmt.Sprintf("/registry/leases/ns/l%d", i), []byte(value), 0)
		if err != nil {
			wantNoSpace(t, "a put beyond the quota", err, "quota is 3.9 KiB (--storage-quota-bytes)")
			break
		}
		kvs = append(kvs, kv)
		if i > 10 {
			t.Fatalf("%d puts of 1000 bytes fit a quota of %d", i, quota)
		}
	}
	if len(kvs) != 3 {
		t.Errorf("%d puts of 1000 bytes fit a quota of %d, want 3", len(kvs), quota)
	}
	rev, _ := s.Revision(ctx)
	if rev != kvs[len(kvs)-1].ModRevision {
		t.Errorf("a refused put moved the revision to %d", rev)
	}
	wantNoSpace(t, "NoSpace at the quota", s.NoSpace(ctx), "quota")

	// An update that does not grow the data is accepted; one that does is
	// not; a conflict is still a conflict.
	same, err := s.Put(ctx, kvs[0].Key, []byte(strings.Repeat("w", 1000)), kvs[0].ModRevision)
	if err != nil {
		t.Fatalf("an update of the same size at the quota: %v", err)
	}
	_, err = s.Put(ctx, kvs[1].Key, []byte(value+strings.Repeat("v", 1000)), kvs[1].ModRevision)
	wantNoSpace(t, "an update that grows the data", err, "quota")
	if _, err := s.Put(ctx, kvs[1].Key, []byte(value), 1); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a conflicting update at the quota: %v, want a conflict", err)
	}
	// A small put fits; the condition lasts while the refused one would
	// not.
	tiny := mustPutKV(t, s, "/registry/leases/ns/tiny", "t", 0)
	wantNoSpace(t, "NoSpace after a small put", s.NoSpace(ctx), "quota")
	if _, err := s.Delete(ctx, tiny.Key, tiny.ModRevision); err != nil {
		t.Fatal(err)
	}

	// A delete is accepted and makes room.
	if _, err := s.Delete(ctx, same.Key, same.ModRevision); err != nil {
		t.Fatalf("a delete at the quota: %v", err)
	}
	if err := s.NoSpace(ctx); err != nil {
		t.Errorf("NoSpace after a delete made room: %v", err)
	}
	if _, err := s.Put(ctx, "/registry/leases/ns/after", []byte(value), 0); err != nil {
		t.Fatalf("a put after a delete made room: %v", err)
	}

	// The data size is measured again at Open: the quota holds across
	// restarts.
	used := s.space.used.Load()
	s.Close()
	s = openSpace(t, dir, Options{QuotaBytes: quota})
	if got := s.space.used.Load(); got != used {
		t.Errorf("data size after reopen = %d, want %d as counted before", got, used)
	}
	_, err = s.Put(ctx, "/registry/leases/ns/more", []byte(value), 0)
	wantNoSpace(t, "a put beyond the quota after reopen", err, "quota")
}

// TestDataSizeAccounting: the size the committer keeps up to date equals
// the size measured from the data, after a random mix of writes in
// concurrent batches.
func TestDataSizeAccounting(t *testing.T) {
	dir := t.TempDir()
	s := openSpace(t, dir, Options{QuotaBytes: -1})
	ctx := t.Context()
	const writers, keys = 8, 20
	done := make(chan struct{})
	for w := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			mod := map[string]int64{}
			for range 200 {
				key := fmt.Sprintf("/registry/leases/ns/w%d-%d", w, rand.IntN(keys))
				if rev := mod[key]; rev != 0 && rand.IntN(4) == 0 {
					if _, err := s.Delete(ctx, key, rev); err != nil {
						t.Error(err)
						return
					}
					delete(mod, key)
					continue
				}
				kv, err := s.Put(ctx, key, []byte(strings.Repeat("x", rand.IntN(3000))), mod[key])
				if err != nil {
					t.Error(err)
					return
				}
				mod[key] = kv.ModRevision
			}
		}()
	}
	for range writers {
		<-done
	}
	measured, err := measureData(s.db)
	if err != nil {
		t.Fatal(err)
	}
	if used := s.space.used.Load(); used != measured {
		t.Errorf("data size kept by the committer = %d, measured = %d", used, measured)
	}
}

func TestReserve(t *testing.T) {
	const reserve = 1 << 20
	fs := &freeSpaceFS{FS: vfs.Default}
	fs.free.Store(100 << 20)
	s := openSpace(t, t.TempDir(), Options{FS: fs, ReserveBytes: reserve})
	ctx := t.Context()
	a := mustPutKV(t, s, "/registry/leases/ns/a", "a", 0)
	b := mustPutKV(t, s, "/registry/leases/ns/b", "b", 0)

	// Below the reserve: puts are refused, even those that do not grow
	// the data; deletes are accepted.
	fs.free.Store(reserve - 1)
	_, err := s.Put(ctx, "/registry/leases/ns/c", []byte("c"), 0)
	wantNoSpace(t, "a put below the reserve", err, "has 1023 KiB free, less than the 1 MiB that leasehold keeps in reserve (--storage-reserve-bytes)")
	_, err = s.Put(ctx, a.Key, []byte("x"), a.ModRevision)
	wantNoSpace(t, "an update below the reserve", err, "reserve")
	wantNoSpace(t, "NoSpace below the reserve", s.NoSpace(ctx), "reserve")
	if _, err := s.Delete(ctx, a.Key, a.ModRevision); err != nil {
		t.Fatalf("a delete below the reserve: %v", err)
	}

	// Back just above the reserve: still refused, until a quarter of the
	// reserve more is free.
	fs.free.Store(reserve + reserve/8)
	_, err = s.Put(ctx, "/registry/leases/ns/c", []byte("c"), 0)
	wantNoSpace(t, "a put just above the reserve, after a refusal", err, "reserve")
	wantNoSpace(t, "NoSpace just above the reserve", s.NoSpace(ctx), "reserve")
	fs.free.Store(reserve + reserve/2)
	if err := s.NoSpace(ctx); err != nil {
		t.Errorf("NoSpace with room again: %v", err)
	}
	if _, err := s.Put(ctx, "/registry/leases/ns/c", []byte("c"), 0); err != nil {
		t.Fatalf("a put with room again: %v", err)
	}

	// Below half the reserve, deletes are refused too.
	fs.free.Store(reserve/2 - 1)
	_, err = s.Delete(ctx, b.Key, b.ModRevision)
	wantNoSpace(t, "a delete below half the reserve", err, "reserve")
}

func mustPutKV(t *testing.T, s *Store, key, value string, expected int64) storage.KeyValue {
	t.Helper()
	kv, err := s.Put(context.Background(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return kv
}

func TestBytesString(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1<<20 - 1: "1023 KiB", 64 << 20: "64 MiB",
		2 << 30: "2 GiB", 10<<30 + 1<<29: "10 GiB", 1<<30 + 1<<28: "1.2 GiB",
	} {
		if got := bytesString(n); got != want {
			t.Errorf("bytesString(%d) = %q, want %q", n, got, want)
		}
	}
}
