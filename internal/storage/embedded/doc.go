// Package embedded is the default storage engine: a durable, single-node
// implementation of storage.Interface on pebble
// (github.com/cockroachdb/pebble/v2).
//
// # Why pebble
//
// Measured with tools/kvchoice (one committer, one batch and one fsync per
// drained queue, 500-byte values over 50k keys), pebble sustained about
// 4.1k/26k/75k durable writes/s at 1/16/128 concurrent writers against
// bbolt's 2.4k/8.6k/22k: appending a batch to a log beats rewriting B+tree
// pages and their freelist on every commit.
//
// # On disk
//
// Storage keys (which must start with '/') are pebble keys. A value is
// stored as uvarint CreateRevision, uvarint ModRevision, then the bytes,
// preceded for a value written with a TTL by a 0x00 byte and its uvarint
// expiry. Bookkeeping keys start with 0x00 and so sort before every storage
// key: the store revision (written in every batch, so it never goes back,
// even when the keys of the newest revisions are deleted and the process
// restarts), a format version checked by Open (2; Open upgrades 1, which
// had no expiries), and the expiry index, one key per expiring value,
// ordered by expiry. Nothing else is stored: history lives in memory only.
//
// # Expiry
//
// A value written WithTTL expires at the store clock's time of the Put
// plus the TTL. The reaper goroutine deletes expired keys about every
// second (store_expire.go): each round reads the expiry index from where
// the last round stopped up to the present, and hands the committer one
// conditional delete per entry, committed with the other writes; a round
// costs what expires in it, however many keys expire later (a few
// microseconds when none is due, with 1,000 or 50,000 pending:
// BenchmarkReapRoundIdle). Expiries are on
// disk with the values: a key due while the store was closed is deleted
// at the first round after Open. Once at least 10,000 keys have expired
// and a round finds none due (a burst, an event storm, has passed), the
// reaper compacts the store, so that the tombstones and the data they
// cover leave the disk then, not whenever later writes get to them.
//
// # Writes
//
// One committer goroutine does every write. Put and Delete copy their
// arguments into a request and enqueue it on a bounded channel (1024
// requests; a writer blocks, honouring its ctx, while it is full). The
// committer takes all queued requests (up to 1024, or about 2 MiB of
// values), checks each precondition against the key's current record (read
// from pebble, or from an earlier request of the same batch), numbers the
// successful writes with consecutive revisions, and commits them as one
// pebble batch with pebble.Sync. Only after the fsync returns does it
// publish the events and answer the writers: a successful Put or Delete is
// durable. Concurrent writers share an fsync (group commit); a lone writer
// pays one fsync per write. After a commit of four writes or more, the
// next waits until as many are queued, for at most Options.CommitInterval
// (2 ms) from the last one's start: an fsync costs ~100 us of CPU, and
// writers that each wait for their last answer come back together.
//
// Failed preconditions consume no revision. A ConflictError's Current is
// the state the committer checked against, which is the latest.
//
// # Space
//
// Pebble cannot survive a full disk (a failed WAL write is fatal to its
// commit pipeline, and a flush that cannot write its table stalls every
// write behind it), so the committer refuses writes with a
// storage.NoSpaceError before the disk is full: puts while the data
// directory's filesystem has less than Options.ReserveBytes free (64 MiB
// by default), deletes too below half of it; and puts that would grow the
// live data (keys and records) beyond Options.QuotaBytes (2 GiB). The
// quota counts data, not files, so a delete frees quota at once. A
// refused write changes nothing and consumes no revision. The reserve
// leaves pebble room to flush what was written and to compact; writes
// resume by themselves once there is room: at the next write, or when
// NoSpace (readiness) looks again. See space.go.
//
// # Faults
//
// What the engine does when the disk misbehaves:
//
//   - Full (ENOSPC): refused writes as above, before pebble sees it. If
//     another process takes the reserve and pebble's background work meets
//     ENOSPC, puts are refused until there is room and pebble retries.
//   - An I/O error (EIO, or a filesystem turned read-only after errors) in
//     a commit (a WAL write or fsync) or in pebble's background work (a
//     flush or compaction writing a table): the engine cannot know what
//     reached the disk, and after a failed fsync the operating system may
//     have dropped the pages it could not write, so the store fails for
//     good ("fail-stop"). The batch's writers get an error wrapping
//     storage.ErrUnavailable, as does every later call (at once, never
//     waiting), watches end, Err reports the cause and Done is closed.
//     Nothing acknowledged is lost: the writes of the failed batch were not
//     acknowledged, and every acknowledged one is in the WAL. The server
//     exits when Done closes, so that its supervisor restarts it and pebble
//     recovers from the WAL at Open: the choice is to exit and restart
//     rather than to serve reads without writes until someone restarts by
//     hand. Pebble's own fatal errors outside a commit (a failed MANIFEST
//     write) end the process at once; see pebbleLogger.
//   - Slow (fsync taking seconds): writes wait in the queue, each until its
//     ctx ends; reads do not wait for them (except a Get or List that may
//     have seen the batch being committed, which waits for that one
//     fsync). Pebble's disk health checks log operations slower than 5 s.
//
// # Reads
//
// Get and List read pebble directly. Pebble makes a batch visible a moment
// before its fsync returns, so a read that may have seen the batch being
// committed waits for that commit to finish (see store_read.go): reads
// never return a write that could still be lost, and they are
// linearizable. List reads the store revision from the same pebble
// iterator as the keys, so its Revision is exactly the revision of the
// snapshot.
//
// # Watch
//
// Committed events go to an in-memory ring (Options.History events, at most
// Options.HistoryBytes). Each watch has a goroutine that pulls from the ring
// at its own pace and is woken by a channel closed on every commit; the
// committer never waits for watchers. A watch that starts before the ring,
// or falls behind it, ends with storage.ErrCompacted, and the caller lists
// again. The ring starts empty at Open. Store.Watch documents when progress
// notes are sent.
//
// # Snapshots
//
// Store.Snapshot streams a copy of every pebble key at one revision from a
// pebble snapshot, taken under the read lock like any read: the committer
// never waits for it, and writes go on while it streams. Restore builds a
// new store from such a stream. The file is a logical dump with a format
// version and a SHA-256 over all of it (snapshot.go): one stream that
// fits an HTTP answer, compact, readable by later pebble versions, and
// checked end to end; pebble's checkpoints are directories of files in
// its own on-disk format. A restored store keeps every key's revisions
// (the objects' resourceVersions); its revision may be bumped so that no
// client's resourceVersion from the old store can resume a watch on the
// new one (see Restore).
//
// # Ownership
//
// Values passed to Put are copied. Values returned by Put, Delete and
// ConflictError, and those delivered by Watch, are shared between the
// writer, the history and every watcher: they must not be modified. Get
// and List return fresh copies.
//
// # Concurrency
//
// Goroutines: the committer (from Open until Close has drained the queue),
// the reaper (until Close) and one per watch (until its ctx, the store, or
// compaction ends it). Close waits for all of them, and for running
// snapshots, which it stops. Locks, in order: Store.mu (read side held by
// every operation while it uses pebble or enqueues; write side by Close),
// then history.mu.
package embedded
