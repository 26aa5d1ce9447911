// Package etcd is the storage engine for several leasehold replicas: an
// implementation of storage.Interface over a real etcd cluster, through
// go.etcd.io/etcd/client/v3, with kube-apiserver's semantics
// (k8s.io/apiserver/pkg/storage/etcd3).
//
// # Keys, values and revisions
//
// Keys are used as given: the registry already lays them out under its
// prefix (--etcd-prefix, "/registry" by default) exactly as kube-apiserver
// does, and values arrive in kube-apiserver's protobuf storage encoding, so
// the data is readable by Kubernetes tooling (etcdctl, auger). The store's
// revision is etcd's revision; a resourceVersion is an etcd ModRevision.
//
// # Writes
//
// Put is one transaction: if the key's ModRevision equals the expected one
// (for a create: if its CreateRevision is 0, i.e. it does not exist), put
// the value and read the key's revisions back in the same transaction
// (a read after a write inside a transaction sees the write, so an update
// learns its CreateRevision without returning the old value); otherwise
// read the current value, so that a *storage.ConflictError carries Current
// without another round trip. Delete is the same with a delete that returns
// the previous value. Exactly what kube-apiserver's OptimisticPut and
// OptimisticDelete do (etcd client/v3/kubernetes).
//
// A Put WithTTL attaches the key to an etcd lease, as kube-apiserver does
// for Events, so etcd deletes the key when the lease expires and tools
// reading etcd see the lease. Leases are shared as kube-apiserver's lease
// manager shares them (lease.go): a write reuses the last lease granted
// while it expires no more than 5% of the TTL (at most a minute) after
// the write's own expiry and holds fewer than 1,000 keys; otherwise a new
// one is granted for the TTL plus that margin. A lease's keys are deleted
// in one etcd transaction, so their watch events share a revision.
//
// A write acknowledged without error has been committed by a quorum. A write
// that fails with storage.ErrUnavailable may or may not have been applied:
// the request can be lost after etcd received it (a member killed, a
// connection cut). Writes are never retried by this engine, since a retried
// compare-and-swap could fail against its own first attempt.
//
// # Reads
//
// Get, List and Revision are linearizable reads (etcd's default, a quorum
// read through ReadIndex). List reads a large prefix in pages of
// listPageSize keys, each page after the first pinned to the revision of
// the first, so the result is one consistent snapshot, as kube-apiserver's
// paginated lists are; if a page's revision has been compacted meanwhile the
// whole list starts again.
//
// # Watch
//
// Each Watch has its own etcd watcher (its own gRPC stream) started with
// WithRev(from+1), WithProgressNotify and WithRequireLeader (so that a
// member cut off from its leader ends the watch instead of silently
// stalling; kube-apiserver does the same). The client library resumes the
// stream on another member when one fails. Unlike kube-apiserver's it does
// not ask for previous values (WithPrevKV): the watch cache has them, and
// they would double what etcd reads and sends for every update. A delete
// event's KV holds the key and the delete's revision. Watch checks
// synchronously, with a read at revision from, that the history it needs
// has not been compacted, and fails with storage.ErrCompacted if it has; a
// compaction that happens later ends the watch with an error wrapping
// storage.ErrCompacted. While the whole
// cluster is out of reach a watch stays open, silent, and resumes when a
// member is back (as kube-apiserver's do); Revision, and so consistent
// reads, fail meanwhile.
//
// # Progress
//
// etcd tells a watcher of one prefix about revisions spent elsewhere only
// in progress notifications, which it sends on its own every 10 minutes by
// default. The watch cache cannot wait that long: a consistent read calls
// Revision and then waits, within 3 seconds, until the cache has reached
// that revision. So the engine asks for progress itself, like
// kube-apiserver's cacher (apiserver/pkg/storage/cacher/progress): Revision
// raises a target revision and any watch that has not yet reported the
// target gets an immediate RequestProgress, unless it delivered something
// within the last few milliseconds (streamingGrace): a watch streaming
// events is asked once it has been silent that long, as under a steady
// write load the revisions it lags are on their way to it; a successful
// write of this
// engine raises the target too, and a watch that still lags it a moment
// later (progressPeriod) is asked as well. Requests repeat every
// progressPeriod while a watch lags, because etcd ignores a progress
// request while the watch is replaying history, and because the member
// that serves the watch may be slightly behind the one that answered
// Revision. Each progress response becomes a storage.EventProgress at the
// member's revision, sent only when it is above everything the watch has
// already delivered.
//
// # Compaction
//
// Like kube-apiserver (apiserver/pkg/storage/etcd3/compact.go), every
// Options.CompactInterval the engine compacts etcd's history up to the
// revision it observed one interval earlier. Replicas (and kube-apiservers
// sharing the cluster) coordinate through the version of the key
// "compact_rev_key": a replica compacts only if a transaction that compares
// that version with the one it last saw, and bumps it, succeeds; the others
// learn the new version and try again one interval later. So the cluster is
// compacted about once per interval whatever the number of replicas, and
// when the replica that compacted goes away another takes over within two
// intervals. Each round writes compact_rev_key, outside every leasehold
// prefix; watchers learn of that revision through progress notes.
//
// # Errors
//
//   - storage.ErrNotFound, storage.ErrConflict: as the contract says.
//   - storage.ErrCompacted: etcd's "required revision has been compacted".
//   - storage.ErrTooLarge: a value above Options.MaxValueSize (checked
//     before sending), etcd's "request is too large" (its
//     --max-request-bytes), or gRPC's message size limits.
//   - storage.ErrUnavailable: the engine is closed; etcd is out of reach
//     (gRPC Unavailable: no connection, a member stopping, no leader,
//     a leader change, a server-side request timeout, too many requests);
//     or the request's deadline passed, its own or Options.RequestTimeout,
//     in which case the error wraps context.DeadlineExceeded too. The
//     client library waits for a connection rather than failing at once
//     (gRPC WaitForReady), so against an unreachable cluster every request
//     ends this way at its deadline.
//   - a caller's own cancellation is returned as context.Canceled.
//   - anything else (authentication, permission, "database space
//     exceeded") is returned wrapped as is, an internal error for the
//     caller, as kube-apiserver answers it.
//
// # Ownership
//
// Values passed to Put are copied. Values returned by every method and
// delivered by watches come from freshly decoded etcd responses. They must
// not be modified.
//
// # Concurrency
//
// Goroutines: one per watch (until its ctx ends, it fails, or the store
// closes), the progress requester, and the compactor when enabled; each is
// tied to the store's stop context and counted in Store.active, as are
// requests in flight. Close cancels that context, so requests and watches in
// flight end with storage.ErrUnavailable, waits for all of them, then closes
// the client. Locks: Store.mu (closed) and progress.mu (the set of watches
// and the target) are never held together.
package etcd
