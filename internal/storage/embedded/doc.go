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
// stored as uvarint CreateRevision, uvarint ModRevision, then the bytes. Two
// bookkeeping keys start with 0x00 and so sort before every storage key: the
// store revision (written in every batch, so it never goes back, even when
// the keys of the newest revisions are deleted and the process restarts) and
// a format version checked by Open. Nothing else is stored: history lives in
// memory only.
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
// pays one fsync per write.
//
// Failed preconditions consume no revision. A ConflictError's Current is
// the state the committer checked against, which is the latest.
//
// # Fail-stop
//
// If a commit or its fsync fails, the engine cannot know what reached the
// disk, so it stops: that batch's writers get an error wrapping
// storage.ErrUnavailable, as does every later call, watches end, Err reports
// the cause and Done is closed. Restarting the process recovers from
// pebble's write-ahead log. See pebbleLogger for how pebble's own fatal
// errors are handled.
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
// # Ownership
//
// Values passed to Put are copied. Values returned by Put, Delete and
// ConflictError, and those delivered by Watch, are shared between the
// writer, the history and every watcher: they must not be modified. Get
// and List return fresh copies.
//
// # Concurrency
//
// Goroutines: the committer (from Open until Close has drained the queue)
// and one per watch (until its ctx, the store, or compaction ends it).
// Close waits for all of them. Locks, in order: Store.mu (read side held by
// every operation while it uses pebble or enqueues; write side by Close),
// then history.mu.
package embedded
