// Package leasemetrics tells an operator when a Lease is in trouble: how
// many leases are held and how many have expired (as lease.Term in
// internal/resources/lease defines it, for the table's Expired column too:
// held, and renewTime plus leaseDurationSeconds passed without a renewal;
// a lease without a holder is released, not expired) per namespace, how often
// they are renewed and change holder, and how long the oldest held lease
// has gone without a renewal. No Kubernetes server has these.
//
// An Observer follows every Lease through the registry's watch, as any
// controller does (a streaming list, then changes; it resumes from the
// last revision it saw, and lists again only after a 410), and keeps per
// lease the little it needs: holder, renewTime, the deadline and
// transitions. Its cost is per event, not per scrape: a renewal is a map
// lookup, an entry updated in place and two pushes on min-heaps (of
// deadlines, of renewTimes per namespace), which times that only grow
// leave at the bottom. Items a later push made stale stay in the heaps
// until they come to the top or the heap is rebuilt, at twice its live
// size. Expiry needs no event: a scrape pops the deadlines that have
// passed and moves those leases to the expired counts (O(k log n) for k
// newly expired), so a lease left unrenewed shows as expired at the first
// scrape after its deadline. Nothing scans the leases per scrape.
//
// Cardinality: the aggregate series are per namespace. Per-lease series
// (holder, seconds since renewal, expired, transitions) exist only for
// leases of namespaces with at most Options.SmallNamespace leases (64),
// where leader-election leases live, and for at most Options.MaxLeaseSeries
// leases (1000) in all, in namespace and name order; node leases (one
// namespace with a lease per node) are counted, never listed. So 100,000
// node leases add no series at all.
//
// History: the observer also keeps, per lease, its last 10 tenures
// (holder, since, last renewal, released, and the gap since the previous
// holder's last renewal), as this replica has seen them since it started,
// for the live view (/leasehold/v1/leasehistory). It is bounded: 10
// tenures a lease, holders clipped to 128 bytes, and at most
// Options.MaxHistoryLeases (4096) leases. A tenure takes 80 bytes and its
// holder, so a lease's history is at most about 2.2 KB and the whole under
// 10 MB (a few hundred kilobytes in a usual cluster). Leases are tracked as
// first seen; once the cap is reached, a lease that changes holder takes
// the place of one that never has (a node's lease), so the flapping ones
// are kept. A renewal updates the current tenure in place.
//
// Every replica runs its own Observer (it only reads), so with several
// replicas every replica reports the same leases: aggregate across
// replicas with max, not sum.
//
// Concurrency: Run (one goroutine, owned by the controller runner) writes
// under Observer.mu; Collect (the scrape) takes the same lock. Lock order:
// Observer.mu is never held while calling the registry.
package leasemetrics
