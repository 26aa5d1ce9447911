package etcd

import (
	"context"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease sharing, kube-apiserver's (apiserver/pkg/storage/etcd3/lease_manager.go):
// a write with a TTL reuses the lease of the previous one when that lease
// expires after the new TTL, but not by more than a small margin
// (leaseReusePercent of the TTL, at most leaseReuseSeconds), and carries
// fewer than leaseMaxObjects keys. A new lease is granted for the TTL plus
// that margin, so a key lives between its TTL and its TTL plus the margin.
const (
	leaseReuseSeconds = 60
	leaseReusePercent = 0.05
	leaseMaxObjects   = 1000
)

// leases grants the etcd leases of expiring writes, one at a time, and
// remembers the last.
type leases struct {
	client *clientv3.Client
	now    func() time.Time

	// mu guards the fields below; it is held while a new lease is
	// granted, so that concurrent writes share it.
	mu       sync.Mutex
	id       clientv3.LeaseID
	expires  time.Time
	attached int64
}

// get returns a lease for a key that must live ttl.
func (l *leases) get(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	seconds := int64(math.Ceil(ttl.Seconds()))
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	margin := min(int64(leaseReusePercent*float64(seconds)), leaseReuseSeconds)
	valid := now.Add(time.Duration(seconds) * time.Second).Before(l.expires)
	sufficient := now.Add(time.Duration(seconds+margin) * time.Second).After(l.expires)
	// Every request counts, whether its write succeeds or not.
	l.attached++
	if valid && sufficient && l.attached <= leaseMaxObjects {
		return l.id, nil
	}
	seconds += margin
	resp, err := l.client.Grant(ctx, seconds)
	if err != nil {
		return clientv3.NoLease, err
	}
	l.id, l.expires, l.attached = resp.ID, now.Add(time.Duration(seconds)*time.Second), 1
	return l.id, nil
}
