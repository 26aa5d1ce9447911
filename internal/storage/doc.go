// Package storage is the contract between the registry and the storage
// engines: a revisioned key/value store shaped like etcd.
//
// Every successful write gets the next value of one global revision counter,
// shared by all keys; that revision is the object's resourceVersion. A write
// is acknowledged only once it is durable: fsync'd by the embedded engine,
// committed by a quorum for etcd.
//
// Reads of history are not part of the contract: the watch cache keeps the
// recent past in memory and serves every read at an older revision. Engines
// only need to list the present and replay events from a recent revision.
package storage
