// Package watchcache keeps the current state of each served resource in
// memory, with a window of recent events, and serves every read from it:
// get, list (at the current revision, at an exact recent revision, and page
// by page from one snapshot) and watch.
//
// One feeder per store lists the whole key space once, then follows a single
// storage watch, so every resource's cache learns every revision, including
// revisions spent on other resources. That is what lets a consistent read
// wait for "the cache has seen revision R" with one comparison.
//
// Concurrency: the feeder goroutine is the only writer. It owns a working
// B-tree and, after applying a batch of events, publishes an immutable
// clone of it together with the revision (a State) through an atomic
// pointer. Readers never lock: they load a State and iterate it. Events go
// to a ring guarded by Cache.mu; watchers read the ring at their own pace.
//
// Lock order: Cache.mu is never held while calling into storage, into
// another Cache, or while writing to a network connection.
package watchcache
