package embedded

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/storage"
)

// TestKnownKeys: with the committer's memory of keys smaller than the
// keys written, preconditions still see every key's current revision,
// conflicts still carry the current value, and a deleted key is gone.
func TestKnownKeys(t *testing.T) {
	old := maxKnown
	maxKnown = 4
	t.Cleanup(func() { maxKnown = old })
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	kvs := map[string]storage.KeyValue{}
	for round := range 3 {
		for i := range 10 {
			key := fmt.Sprintf("/registry/leases/default/l%d", i)
			value := fmt.Sprintf("v%d-%d", i, round)
			kv, err := s.Put(ctx, key, []byte(value), kvs[key].ModRevision)
			if err != nil {
				t.Fatalf("round %d: put %s: %v", round, key, err)
			}
			kvs[key] = kv
			// A stale precondition fails with the current value.
			_, err = s.Put(ctx, key, []byte("stale"), kv.ModRevision-1)
			var ce *storage.ConflictError
			if !errors.As(err, &ce) || ce.Current == nil || string(ce.Current.Value) != value || ce.Current.ModRevision != kv.ModRevision {
				t.Fatalf("round %d: stale put of %s: %v (current %+v)", round, key, err, ce)
			}
		}
	}
	// A deleted key is no longer known: creating it again succeeds, and a
	// put with its old revision fails.
	key := "/registry/leases/default/l9"
	if _, err := s.Delete(ctx, key, kvs[key].ModRevision); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, key, []byte("again"), kvs[key].ModRevision); !errors.As(err, new(*storage.ConflictError)) {
		t.Fatalf("put of a deleted key with its old revision: %v", err)
	}
	if _, err := s.Put(ctx, key, []byte("again"), 0); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}
