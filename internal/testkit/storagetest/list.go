package storagetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/storage"
)

func (s *suite) testListPrefix(t *testing.T) {
	st := s.newStore(t)
	keys := []string{
		// Inserted out of order on purpose.
		"/registry/leases/b",
		"/registry/leases/a",
		"/registry/leases/ab",
		"/registry/leases/a/x",
		"/registry/leases/a/y",
		"/registry/leases-other/a",
		"/registry/lease",
		"/registry/leasesa",
		"/registry/z\xff",
		"/registry/z\xff\xff",
		"/registry/z\xff\xff\x00",
		"/registry/zz",
	}
	stored := map[string]storage.KeyValue{}
	for _, k := range keys {
		stored[k] = mustPut(t, st, k, "value of "+k, 0)
	}
	// A deleted key under the prefix is not listed.
	gone := mustPut(t, st, "/registry/leases/a/gone", "x", 0)
	mustDelete(t, st, gone.Key, gone.ModRevision)
	rev := mustRevision(t, st)

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"/registry/leases/", []string{"/registry/leases/a", "/registry/leases/a/x", "/registry/leases/a/y", "/registry/leases/ab", "/registry/leases/b"}},
		// Pure prefix semantics: "a" also matches "ab"; callers that mean
		// one namespace end the prefix with a slash.
		{"/registry/leases/a", []string{"/registry/leases/a", "/registry/leases/a/x", "/registry/leases/a/y", "/registry/leases/ab"}},
		{"/registry/leases/a/", []string{"/registry/leases/a/x", "/registry/leases/a/y"}},
		{"/registry/leases/a/x", []string{"/registry/leases/a/x"}},
		{"/registry/leases", []string{"/registry/leases-other/a", "/registry/leases/a", "/registry/leases/a/x", "/registry/leases/a/y", "/registry/leases/ab", "/registry/leases/b", "/registry/leasesa"}},
		{"/registry/leases/c", nil},
		{"/registry/z\xff", []string{"/registry/z\xff", "/registry/z\xff\xff", "/registry/z\xff\xff\x00"}},
		{"/registry/z\xff\xff", []string{"/registry/z\xff\xff", "/registry/z\xff\xff\x00"}},
		{"/", append([]string{"/registry/lease", "/registry/leases-other/a", "/registry/leases/a", "/registry/leases/a/x", "/registry/leases/a/y", "/registry/leases/ab", "/registry/leases/b", "/registry/leasesa"},
			"/registry/zz", "/registry/z\xff", "/registry/z\xff\xff", "/registry/z\xff\xff\x00")},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			res := mustList(t, st, tc.prefix)
			var got []string
			for _, kv := range res.KVs {
				got = append(got, kv.Key)
				diffKV(t, "listed "+kv.Key, kv, stored[kv.Key])
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("List(%q) keys (-want +got):\n%s", tc.prefix, d)
			}
			if res.Revision != rev {
				t.Errorf("List(%q).Revision = %d, want the store revision %d", tc.prefix, res.Revision, rev)
			}
		})
	}
}

// testListRevision checks that a list reports the revision of the whole
// store, writes to other prefixes and deletes included.
func (s *suite) testListRevision(t *testing.T) {
	st := s.newStore(t)
	r0 := mustRevision(t, st)
	if res := mustList(t, st, "/registry/leases/"); len(res.KVs) != 0 || res.Revision != r0 {
		t.Fatalf("List of an empty store = %+v, want no keys at revision %d", res, r0)
	}

	a := mustPut(t, st, "/registry/leases/ns/a", "1", 0)
	mustPut(t, st, "/registry/services/endpoints/ns/a", "1", 0)
	b := mustPut(t, st, "/registry/leases/ns/b", "1", 0)
	mustDelete(t, st, b.Key, b.ModRevision)
	mustPut(t, st, "/registry/namespaces/ns", "1", 0)
	rev := mustRevision(t, st)
	if rev != r0+5 {
		t.Fatalf("Revision after 5 writes = %d, want %d", rev, r0+5)
	}

	res := mustList(t, st, "/registry/leases/")
	if res.Revision != rev {
		t.Errorf("List.Revision = %d, want the store revision %d", res.Revision, rev)
	}
	for _, kv := range res.KVs {
		if kv.ModRevision > res.Revision {
			t.Errorf("listed %q has ModRevision %d above the list revision %d", kv.Key, kv.ModRevision, res.Revision)
		}
	}
	if len(res.KVs) != 1 {
		t.Fatalf("List = %+v, want only %q", res.KVs, a.Key)
	}
	diffKV(t, "listed key", res.KVs[0], a)

	// A prefix with nothing under it still reports the store revision.
	if res := mustList(t, st, "/registry/nothing/"); len(res.KVs) != 0 || res.Revision != rev {
		t.Errorf("List of an empty prefix = %+v, want no keys at revision %d", res, rev)
	}
}
