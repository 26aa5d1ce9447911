package storagetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/internal/storage"
)

func (s *suite) testGetMissing(t *testing.T) {
	st := s.newStore(t)
	_, err := st.Get(t.Context(), "/registry/leases/default/missing")
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get of a missing key: got %v, want ErrNotFound", err)
	}

	// A key that existed and was deleted is missing too.
	kv := mustPut(t, st, "/registry/leases/default/gone", "v", 0)
	mustDelete(t, st, kv.Key, kv.ModRevision)
	if _, err := st.Get(t.Context(), kv.Key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get of a deleted key: got %v, want ErrNotFound", err)
	}
	// A prefix of an existing key is not that key.
	mustPut(t, st, "/registry/leases/default/abc", "v", 0)
	if _, err := st.Get(t.Context(), "/registry/leases/default/ab"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get of a prefix of an existing key: got %v, want ErrNotFound", err)
	}
}

func (s *suite) testGetPresent(t *testing.T) {
	st := s.newStore(t)
	put := mustPut(t, st, "/registry/leases/default/a", "value-a", 0)
	mustPut(t, st, "/registry/leases/default/b", "value-b", 0)
	diffKV(t, "Get after Put", mustGet(t, st, put.Key), put)
	want := storage.KeyValue{Key: put.Key, Value: []byte("value-a"), CreateRevision: put.CreateRevision, ModRevision: put.ModRevision}
	diffKV(t, "Get after Put", mustGet(t, st, put.Key), want)
}

func (s *suite) testPutCreate(t *testing.T) {
	st := s.newStore(t)
	r0 := mustRevision(t, st)
	got := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	want := storage.KeyValue{Key: "/registry/leases/default/a", Value: []byte("v1"), CreateRevision: r0 + 1, ModRevision: r0 + 1}
	diffKV(t, "Put create", got, want)
	if rev := mustRevision(t, st); rev != r0+1 {
		t.Errorf("Revision after one create = %d, want %d", rev, r0+1)
	}
}

func (s *suite) testPutCreateExisting(t *testing.T) {
	st := s.newStore(t)
	existing := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	r := mustRevision(t, st)

	_, err := st.Put(t.Context(), existing.Key, []byte("v2"), 0)
	ce := wantConflict(t, err, existing.Key, 0)
	if ce.Current == nil {
		t.Fatalf("ConflictError.Current is nil for an existing key")
	}
	diffKV(t, "ConflictError.Current", *ce.Current, existing)

	// A failed write changes nothing and uses no revision.
	diffKV(t, "Get after failed create", mustGet(t, st, existing.Key), existing)
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after a failed create = %d, want %d", got, r)
	}
}

func (s *suite) testPutUpdate(t *testing.T) {
	st := s.newStore(t)
	v1 := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	v2 := mustUpdate(t, st, v1, "v2")
	want := storage.KeyValue{Key: v1.Key, Value: []byte("v2"), CreateRevision: v1.CreateRevision, ModRevision: v1.ModRevision + 1}
	diffKV(t, "Put update", v2, want)
	diffKV(t, "Get after update", mustGet(t, st, v1.Key), want)

	// The revision returned is the one to use next.
	v3 := mustUpdate(t, st, v2, "v3")
	if v3.ModRevision != v2.ModRevision+1 || v3.CreateRevision != v1.CreateRevision {
		t.Errorf("second update = %+v, want ModRevision %d, CreateRevision %d", v3, v2.ModRevision+1, v1.CreateRevision)
	}
}

func (s *suite) testPutStale(t *testing.T) {
	st := s.newStore(t)
	v1 := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	v2 := mustUpdate(t, st, v1, "v2")
	v3 := mustUpdate(t, st, v2, "v3")
	r := mustRevision(t, st)

	// Older revisions and a revision the key never had all conflict, and
	// Current is always the latest version.
	for _, stale := range []int64{v1.ModRevision, v2.ModRevision, v3.ModRevision + 100} {
		_, err := st.Put(t.Context(), v1.Key, []byte("stale"), stale)
		ce := wantConflict(t, err, v1.Key, stale)
		if ce.Current == nil {
			t.Fatalf("expected=%d: ConflictError.Current is nil", stale)
		}
		diffKV(t, "ConflictError.Current", *ce.Current, v3)
	}
	diffKV(t, "Get after stale updates", mustGet(t, st, v1.Key), v3)
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after failed updates = %d, want %d", got, r)
	}
}

func (s *suite) testPutUpdateMissing(t *testing.T) {
	st := s.newStore(t)
	other := mustPut(t, st, "/registry/leases/default/other", "x", 0)
	r := mustRevision(t, st)

	// Even an expected revision that some other key has fails.
	_, err := st.Put(t.Context(), "/registry/leases/default/missing", []byte("v"), other.ModRevision)
	ce := wantConflict(t, err, "/registry/leases/default/missing", other.ModRevision)
	if ce.Current != nil {
		t.Errorf("ConflictError.Current = %+v for a missing key, want nil", *ce.Current)
	}
	if _, err := st.Get(t.Context(), "/registry/leases/default/missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after a failed update of a missing key: got %v, want ErrNotFound", err)
	}
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after a failed update = %d, want %d", got, r)
	}
}

func (s *suite) testPutBinaryValues(t *testing.T) {
	st := s.newStore(t)
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"empty", []byte{}},
		{"zero bytes", []byte{0, 0, 0}},
		{"all byte values", func() []byte {
			b := make([]byte, 256)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "/registry/leases/default/" + tc.name
			put, err := st.Put(t.Context(), key, tc.value, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := mustGet(t, st, key)
			if !bytes.Equal(got.Value, tc.value) || !bytes.Equal(put.Value, tc.value) {
				t.Errorf("value round trip: Put returned %q, Get returned %q, want %q", put.Value, got.Value, tc.value)
			}
			list := mustList(t, st, key)
			if len(list.KVs) != 1 || !bytes.Equal(list.KVs[0].Value, tc.value) {
				t.Errorf("List(%q) = %+v, want one key with value %q", key, list.KVs, tc.value)
			}
		})
	}
}

func (s *suite) testPutTooLarge(t *testing.T) {
	if s.opts.MaxValueSize <= 0 {
		t.Skip("Options.MaxValueSize not set")
	}
	st := s.newStore(t)
	key := "/registry/leases/default/big"
	r := mustRevision(t, st)

	tooBig := bytes.Repeat([]byte{'x'}, s.opts.MaxValueSize+1)
	if _, err := st.Put(t.Context(), key, tooBig, 0); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("create with a value of %d bytes: got %v, want ErrTooLarge", len(tooBig), err)
	}
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after a rejected write = %d, want %d", got, r)
	}

	limit := tooBig[:s.opts.MaxValueSize]
	kv, err := st.Put(t.Context(), key, limit, 0)
	if err != nil {
		t.Fatalf("create with a value of exactly MaxValueSize (%d bytes): %v", len(limit), err)
	}
	if got := mustGet(t, st, key); !bytes.Equal(got.Value, limit) {
		t.Errorf("Get of the largest value returned %d bytes, want %d", len(got.Value), len(limit))
	}
	if _, err := st.Put(t.Context(), key, tooBig, kv.ModRevision); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("update with a value of %d bytes: got %v, want ErrTooLarge", len(tooBig), err)
	}
	if got := mustGet(t, st, key); got.ModRevision != kv.ModRevision {
		t.Errorf("a rejected update changed the key: ModRevision %d, want %d", got.ModRevision, kv.ModRevision)
	}
}

func (s *suite) testDeleteMatching(t *testing.T) {
	st := s.newStore(t)
	v1 := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	v2 := mustUpdate(t, st, v1, "v2")
	got := mustDelete(t, st, v1.Key, v2.ModRevision)
	want := storage.KeyValue{Key: v1.Key, Value: []byte("v2"), CreateRevision: v1.CreateRevision, ModRevision: v2.ModRevision + 1}
	diffKV(t, "Delete result", got, want)
	if _, err := st.Get(t.Context(), v1.Key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if rev := mustRevision(t, st); rev != got.ModRevision {
		t.Errorf("Revision after Delete = %d, want the delete's revision %d", rev, got.ModRevision)
	}
}

func (s *suite) testDeleteMismatching(t *testing.T) {
	st := s.newStore(t)
	v1 := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	v2 := mustUpdate(t, st, v1, "v2")
	r := mustRevision(t, st)
	for _, expected := range []int64{v1.ModRevision, v2.ModRevision + 1} {
		_, err := st.Delete(t.Context(), v1.Key, expected)
		ce := wantConflict(t, err, v1.Key, expected)
		if ce.Current == nil {
			t.Fatalf("ConflictError.Current is nil for an existing key")
		}
		diffKV(t, "ConflictError.Current", *ce.Current, v2)
	}
	diffKV(t, "Get after failed deletes", mustGet(t, st, v1.Key), v2)
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after failed deletes = %d, want %d", got, r)
	}
}

func (s *suite) testDeleteMissing(t *testing.T) {
	st := s.newStore(t)
	kv := mustPut(t, st, "/registry/leases/default/a", "v1", 0)
	del := mustDelete(t, st, kv.Key, kv.ModRevision)
	r := mustRevision(t, st)
	for _, tc := range []struct {
		name     string
		key      string
		expected int64
	}{
		{"never existed", "/registry/leases/default/never", 1},
		{"deleted, old revision", kv.Key, kv.ModRevision},
		{"deleted, delete revision", kv.Key, del.ModRevision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Delete(t.Context(), tc.key, tc.expected)
			if !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("Delete(%q, %d): got %v, want ErrNotFound", tc.key, tc.expected, err)
			}
			if errors.Is(err, storage.ErrConflict) {
				t.Errorf("Delete of a missing key also matches ErrConflict: %v", err)
			}
		})
	}
	if got := mustRevision(t, st); got != r {
		t.Errorf("Revision after failed deletes = %d, want %d", got, r)
	}
}

// testRevisionGlobal checks that one counter serves every key: each
// successful write, delete included, takes exactly the next revision.
func (s *suite) testRevisionGlobal(t *testing.T) {
	st := s.newStore(t)
	r := mustRevision(t, st)
	step := func(what string, got int64) {
		t.Helper()
		r++
		if got != r {
			t.Errorf("%s: revision %d, want %d", what, got, r)
		}
		if cur := mustRevision(t, st); cur != r {
			t.Errorf("%s: Revision() = %d, want %d", what, cur, r)
		}
	}
	a := mustPut(t, st, "/registry/leases/ns1/a", "1", 0)
	step("create a", a.ModRevision)
	b := mustPut(t, st, "/registry/services/endpoints/ns1/b", "1", 0)
	step("create b (other resource)", b.ModRevision)
	a = mustUpdate(t, st, a, "2")
	step("update a", a.ModRevision)
	// Failed writes in between use no revision.
	if _, err := st.Put(t.Context(), b.Key, []byte("x"), 0); err == nil {
		t.Fatal("create of an existing key succeeded")
	}
	if _, err := st.Delete(t.Context(), "/registry/namespaces/none", 1); err == nil {
		t.Fatal("delete of a missing key succeeded")
	}
	del := mustDelete(t, st, b.Key, b.ModRevision)
	step("delete b", del.ModRevision)
	c := mustPut(t, st, "/registry/namespaces/ns1", "1", 0)
	step("create c", c.ModRevision)
	b = mustPut(t, st, b.Key, "again", 0)
	step("recreate b", b.ModRevision)
}

func (s *suite) testCreateRevision(t *testing.T) {
	st := s.newStore(t)
	key := "/registry/leases/default/a"
	v1 := mustPut(t, st, key, "v1", 0)
	if v1.CreateRevision != v1.ModRevision {
		t.Errorf("created key: CreateRevision %d != ModRevision %d", v1.CreateRevision, v1.ModRevision)
	}
	v2 := mustUpdate(t, st, v1, "v2")
	mustPut(t, st, "/registry/leases/default/other", "x", 0)
	v3 := mustUpdate(t, st, v2, "v3")
	for _, kv := range []storage.KeyValue{v2, v3, mustGet(t, st, key)} {
		if kv.CreateRevision != v1.CreateRevision {
			t.Errorf("after update to ModRevision %d: CreateRevision %d, want %d", kv.ModRevision, kv.CreateRevision, v1.CreateRevision)
		}
	}
	del := mustDelete(t, st, key, v3.ModRevision)
	if del.CreateRevision != v1.CreateRevision {
		t.Errorf("deleted KeyValue: CreateRevision %d, want %d", del.CreateRevision, v1.CreateRevision)
	}
	again := mustPut(t, st, key, "again", 0)
	if again.CreateRevision != again.ModRevision || again.CreateRevision <= del.ModRevision {
		t.Errorf("recreated key: CreateRevision %d, ModRevision %d; want both equal and above the delete at %d",
			again.CreateRevision, again.ModRevision, del.ModRevision)
	}
	diffKV(t, "Get after recreate", mustGet(t, st, key), again)
}

// testRevisionLinearizable checks Revision and reads right after each
// acknowledged write: nothing acknowledged may be missing from them.
func (s *suite) testRevisionLinearizable(t *testing.T) {
	st := s.newStore(t)
	kv := storage.KeyValue{Key: "/registry/leases/default/a"}
	for i := range 20 {
		if i == 0 {
			kv = mustPut(t, st, kv.Key, "a", 0)
		} else {
			kv = mustUpdate(t, st, kv, string(rune('a'+i)))
		}
		if rev := mustRevision(t, st); rev < kv.ModRevision {
			t.Fatalf("Revision() = %d right after a write acknowledged at %d", rev, kv.ModRevision)
		}
		diffKV(t, "Get right after Put", mustGet(t, st, kv.Key), kv)
		if l := mustList(t, st, "/registry/leases/"); l.Revision < kv.ModRevision || len(l.KVs) != 1 || l.KVs[0].ModRevision != kv.ModRevision {
			t.Fatalf("List right after a write acknowledged at %d: revision %d, %+v", kv.ModRevision, l.Revision, l.KVs)
		}
	}
}
