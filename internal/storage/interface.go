package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// KeyValue is one version of a key. Its Value may be shared by the engine
// with other callers and watchers: read it, never modify it.
type KeyValue struct {
	Key   string
	Value []byte
	// CreateRevision is the revision that created the key; it survives
	// updates and is reset when the key is deleted and created again.
	CreateRevision int64
	// ModRevision is the revision of the write that produced Value.
	ModRevision int64
}

// EventType says what a watch event reports.
type EventType int

const (
	// EventPut reports a created or updated key.
	EventPut EventType = iota
	// EventDelete reports a deleted key.
	EventDelete
	// EventProgress carries no key: it says that every event up to Revision
	// has been delivered. Engines send it when asked or when idle so that a
	// watcher of one prefix learns about revisions spent on other prefixes.
	EventProgress
)

// Event is one change seen by a watch. It carries no previous value: the
// one consumer, the watch cache, holds every key's current state already,
// and over etcd a previous value would double the watch traffic.
type Event struct {
	Type EventType
	// KV is the key after the change. For EventDelete only KV.Key and
	// KV.ModRevision, the revision of the delete, are set.
	KV KeyValue
	// Revision is the revision of the change (equal to KV.ModRevision for
	// puts and deletes).
	Revision int64
}

// ListResult is the state of a prefix at one revision.
type ListResult struct {
	// KVs are in ascending key order.
	KVs []KeyValue
	// Revision is the store revision the list reflects. It may be larger
	// than every ModRevision in KVs.
	Revision int64
}

// Interface is what a storage engine offers. Implementations are safe for
// concurrent use.
type Interface interface {
	// Get returns the current value of key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) (KeyValue, error)

	// List returns every key that starts with prefix as of one recent,
	// linearizable revision.
	List(ctx context.Context, prefix string) (ListResult, error)

	// Put stores value under key if the key's current ModRevision equals
	// expected; expected 0 means the key must not exist. On success it
	// returns the stored KeyValue, except that an update's CreateRevision
	// may be 0: etcd does not return it without a read in the transaction,
	// which would cost every renewal, and no caller needs it (Get, List
	// and Watch always report it). On a failed precondition it returns a
	// *ConflictError (errors.Is ErrConflict) that carries the current value,
	// so that callers can retry without another read. A value larger than
	// the engine accepts fails with ErrTooLarge; a write the engine has no
	// room for, with ErrNoSpace (which etcd reports before looking at the
	// precondition, the embedded engine after).
	//
	// WithTTL makes the written value expire (see PutOptions.TTL); without
	// it the value stays until it is replaced or deleted.
	//
	// value is the store's once Put is called: it may keep it (the
	// embedded engine does, for its watchers), so the caller must not
	// modify it afterwards.
	Put(ctx context.Context, key string, value []byte, expected int64, opts ...PutOption) (KeyValue, error)

	// Delete removes key if its current ModRevision equals expected (which
	// must be positive). It returns the deleted KeyValue with ModRevision set
	// to the revision of the delete. A missing key fails with ErrNotFound;
	// a different revision with a *ConflictError. A store out of space
	// still accepts deletes (etcd too refuses only writes that add data).
	Delete(ctx context.Context, key string, expected int64) (KeyValue, error)

	// Watch streams every change to keys under prefix with a revision
	// greater than from, in revision order, with no gaps and no
	// duplicates (the keys of one expiry may share a revision, see
	// PutOptions.TTL), plus EventProgress notes. from older than the engine's
	// retained history fails with ErrCompacted. The channel is closed when
	// ctx ends or the watch fails; Err then says why (nil after ctx ends).
	Watch(ctx context.Context, prefix string, from int64) (Watch, error)

	// Revision returns the current revision, linearizably: every write
	// acknowledged before the call is at or below it.
	Revision(ctx context.Context) (int64, error)

	// Close releases the engine. Pending writes either complete or fail.
	Close() error
}

// PutOptions are the options of a Put.
type PutOptions struct {
	// TTL, when positive, makes the value expire: the engine deletes the
	// key once TTL has passed since the Put, unless a later Put has
	// replaced the value (a Put without TTL keeps the new value for good;
	// one with a TTL counts from itself) or the key was deleted. The
	// expiry is a delete like any other: it takes a revision, and watches
	// see an EventDelete. Several keys may expire at one revision (etcd
	// deletes the keys of an expired lease in one transaction), the only
	// case where events share a revision. An engine may delete a key
	// later than TTL, never earlier: etcd's leases last whole seconds, at
	// least etcd's minimum, and are shared by keys written within a while
	// of each other, as kube-apiserver shares them (up to 5% of TTL, at
	// most a minute, later); the embedded engine deletes within about a
	// second. A TTL below a second counts as one. Expiry follows the
	// engine's clock (etcd's leader's, the embedded engine's machine's).
	TTL time.Duration
}

// PutOption sets an option of a Put.
type PutOption func(*PutOptions)

// WithTTL makes a Put's value expire after ttl (see PutOptions.TTL).
func WithTTL(ttl time.Duration) PutOption {
	return func(o *PutOptions) { o.TTL = ttl }
}

// NewPutOptions returns the options opts set, for engines.
func NewPutOptions(opts []PutOption) PutOptions {
	var o PutOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.TTL > 0 && o.TTL < time.Second {
		o.TTL = time.Second
	}
	return o
}

// Watch is a running watch.
type Watch interface {
	// Events delivers changes; it is closed when the watch ends.
	Events() <-chan Event
	// Err reports why the watch ended, once Events is closed.
	Err() error
}

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("storage: key not found")
	// ErrConflict: a write's revision precondition failed.
	ErrConflict = errors.New("storage: revision precondition failed")
	// ErrCompacted: the requested revision is older than retained history.
	ErrCompacted = errors.New("storage: required revision has been compacted")
	// ErrTooLarge: the value exceeds the engine's size limit.
	ErrTooLarge = errors.New("storage: value too large")
	// ErrUnavailable: the engine cannot serve requests (closed, failed, or
	// its backend is out of reach).
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrNoSpace: the engine refused a write because it is out of space:
	// at its size quota, or with its disk (nearly) full. Nothing was
	// written, except by etcd for the one write that crosses its quota:
	// etcd applies that write, then raises its NOSPACE alarm and answers
	// it with this error (server/etcdserver/apply/quota.go); later writes
	// are refused unapplied. Deletes are still accepted, so that space can
	// be freed through the API, and writes are accepted again once there
	// is room. Engines return a *NoSpaceError, whose Message says what to
	// do.
	ErrNoSpace = errors.New("storage: database space exceeded")
)

// NoSpaceError is the error of a write refused for lack of space (errors.Is
// ErrNoSpace). Message is meant for the client and the operator: which
// limit was reached and what frees it.
type NoSpaceError struct {
	Message string
}

func (e *NoSpaceError) Error() string { return e.Message }

func (e *NoSpaceError) Is(target error) bool { return target == ErrNoSpace }

// SpaceReporter is implemented by engines that can say, without writing,
// whether they are refusing writes for lack of space; readiness checks
// use it. It is optional: an engine without it reports ErrNoSpace only
// from writes.
type SpaceReporter interface {
	// NoSpace returns a *NoSpaceError while the engine refuses writes
	// that would grow it, nil while it accepts them, and another error
	// when it cannot tell (the engine is unreachable, say).
	NoSpace(ctx context.Context) error
}

// ConflictError is returned when a write's precondition fails. Current is
// the key's present state, nil when the key does not exist.
type ConflictError struct {
	Key      string
	Expected int64
	Current  *KeyValue
}

func (e *ConflictError) Error() string {
	if e.Current == nil {
		return fmt.Sprintf("storage: %s: expected revision %d, key does not exist", e.Key, e.Expected)
	}
	return fmt.Sprintf("storage: %s: expected revision %d, found %d", e.Key, e.Expected, e.Current.ModRevision)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// PrefixEnd returns the least key greater than every key that starts
// with prefix; ok is false when there is none (prefix is empty or all
// 0xff bytes): a range over the prefix is then unbounded above.
func PrefixEnd(prefix string) (end string, ok bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			return prefix[:i] + string([]byte{prefix[i] + 1}), true
		}
	}
	return "", false
}
