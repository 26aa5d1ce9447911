package etcd_test

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// TestTTLLeases: a value written WithTTL is on an etcd lease that tools
// reading etcd see, of the TTL plus kube-apiserver's reuse margin (5% of
// the TTL, at most a minute); writes share a lease up to 1,000 keys; a
// write without TTL detaches the key.
func TestTTLLeases(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{})
	raw := c.Client(t)
	s := open(t, c, etcd.Options{CompactInterval: -1}, false)
	ctx := t.Context()
	const ttl = time.Hour

	leaseOf := func(key string) clientv3.LeaseID {
		t.Helper()
		resp, err := raw.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("Get(%q): %v, %v", key, resp, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	leases := map[clientv3.LeaseID]int{}
	for i := range 1001 {
		key := fmt.Sprintf("/registry/events/ns/e%04d", i)
		if _, err := s.Put(ctx, key, []byte("v"), 0, storage.WithTTL(ttl)); err != nil {
			t.Fatal(err)
		}
		leases[leaseOf(key)]++
	}
	if len(leases) != 2 {
		t.Fatalf("1001 writes on %d leases (%v), want 1000 on the first and 1 on a second", len(leases), leases)
	}
	for id, keys := range leases {
		ttlResp, err := raw.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// An hour and a minute (5% of an hour is three minutes, more than
		// the most, a minute).
		if ttlResp.GrantedTTL != 3660 || (keys != 1000 && keys != 1) {
			t.Errorf("lease %x: granted %d s, %d keys", id, ttlResp.GrantedTTL, keys)
		}
	}
	kv, err := s.Put(ctx, "/registry/events/ns/e0000", []byte("v2"), mustModRev(t, raw, "/registry/events/ns/e0000"))
	if err != nil {
		t.Fatal(err)
	}
	if id := leaseOf(kv.Key); id != clientv3.NoLease {
		t.Errorf("after a write without TTL the key is on lease %x", id)
	}
}

func mustModRev(t *testing.T, raw *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := raw.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(%q): %v, %v", key, resp, err)
	}
	return resp.Kvs[0].ModRevision
}
