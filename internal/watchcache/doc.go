// Package watchcache keeps the current state of each served kind in
// memory, with a window of recent events, for the registry to serve every
// read from: get, list (at the current revision, at an exact recent
// revision, and page by page from one snapshot) and watch (a Cursor over
// the window, and Filter for selectors). Each cached Object carries the
// memo of its encodings (codec.Memo), and each event the memo of its
// frames, so that encoding happens once however many readers there are.
//
// Memory: an Object keeps its stored bytes, labels and selectable fields,
// not the decoded API object, which the garbage collector would have to
// mark at every cycle (a Lease decodes to some twenty heap objects; its
// bytes are one it does not look into). The decoded form is kept only
// while the object's event is in the window, where every watcher and
// controller reads it; reads after that decode on demand, and most need
// not: a memoised encoding is served as it is. Kinds read decoded on every
// request (RBAC's) are kept decoded throughout (Config.KeepDecoded).
//
// One feeder per store lists the whole key space once, then follows a single
// storage watch, so every kind's cache learns every revision, including
// revisions spent on other kinds. That is what lets a consistent read
// wait for "the cache has seen revision R" with one comparison.
//
// Concurrency: the feeder goroutine is the only writer. It owns a working
// B-tree and, after applying a batch of events, publishes an immutable
// clone of it together with the revision (a State) through an atomic
// pointer. Readers never lock: they load a State and iterate it. Events go
// to a ring guarded by Cache.mu; watchers read the ring at their own pace.
//
// Retention: the window keeps at most Config.Window events, and none
// older than Config.Retention (5 minutes, kube-apiserver's etcd compaction
// interval); paginated lists' snapshots are kept for as long at most. So
// what a burst of writes (an event storm) leaves in memory goes once it
// is that old, even if nothing is written afterwards: the feeder drops it
// every few seconds.
//
// Lock order: Cache.mu is never held while calling into storage, into
// another Cache, or while writing to a network connection.
package watchcache
