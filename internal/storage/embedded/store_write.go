package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/storage"
)

type opKind uint8

const (
	opPut opKind = iota
	opDelete
	// opExpire deletes a key whose expiry has come, if it still has that
	// expiry; the expiry index's reaper sends them.
	opExpire
)

// writeReq is one write travelling to the committer and back.
//
// The writer fills the request fields and enqueues it; from then on the
// committer owns it until it sends on done, after which the writer owns it
// again and may recycle it. A writer that stops waiting (its ctx ended)
// abandons the request instead of recycling it.
type writeReq struct {
	ctx      context.Context
	op       opKind
	key      string
	value    []byte // a private copy; becomes the stored and watched value
	expected int64
	// expires is when a put's value expires, or, for opExpire, the
	// expiry the key must still have (Unix milliseconds; 0: never).
	expires int64

	// Set by the committer before it signals done.
	result storage.KeyValue
	err    error
	done   chan struct{} // capacity 1: the committer never blocks on it
}

func newWriteReq() any { return &writeReq{done: make(chan struct{}, 1)} }

// Put stores value under key if the key's ModRevision is expected (0: the
// key must not exist). See storage.Interface.
//
// Put keeps value (see storage.Interface): it is the returned KeyValue's
// Value, shared with watchers, and must not be modified. (A copy was
// ~0.45 KB of a renewal's ~9.2 KB of allocations.) Keys must start with
// '/'; values longer than Options.MaxValueSize fail with
// storage.ErrTooLarge.
//
// Put returns once the write is durable. If ctx has ended before the write
// is queued, Put returns ctx's error and writes nothing. If ctx ends while
// Put waits for the commit, Put returns an error wrapping ctx's error and
// the outcome is unknown, as with etcd: the committer skips a request whose
// ctx has ended when it takes it from the queue, but may already have
// taken it.
//
// A value written WithTTL expires at the store's clock's time of the Put
// plus the TTL, to the millisecond; see store_expire.go.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	if err := validKey(key); err != nil {
		return storage.KeyValue{}, err
	}
	if expected < 0 {
		return storage.KeyValue{}, fmt.Errorf("embedded: put %q: negative expected revision %d", key, expected)
	}
	if len(value) > s.opts.MaxValueSize {
		return storage.KeyValue{}, fmt.Errorf("%w: %q: %d bytes, limit %d", storage.ErrTooLarge, key, len(value), s.opts.MaxValueSize)
	}
	var expires int64
	if o := storage.NewPutOptions(opts); o.TTL > 0 {
		expires = s.opts.Now().Add(o.TTL).UnixMilli()
	}
	return s.write(ctx, writeArgs{op: opPut, key: key, value: value, expected: expected, expires: expires})
}

// Delete removes key if its ModRevision is expected, which must be
// positive. See storage.Interface. The returned KeyValue holds the last
// value, shared with watchers: it must not be modified. Context handling is
// as for Put.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, error) {
	if err := validKey(key); err != nil {
		return storage.KeyValue{}, err
	}
	if expected <= 0 {
		return storage.KeyValue{}, fmt.Errorf("embedded: delete %q: expected revision must be positive, got %d", key, expected)
	}
	return s.write(ctx, writeArgs{op: opDelete, key: key, expected: expected})
}

// validKey rejects keys outside the storage key space, which would collide
// with the engine's own bookkeeping keys.
func validKey(key string) error {
	if !strings.HasPrefix(key, dataStart) {
		return fmt.Errorf("embedded: key %q does not start with %q", key, dataStart)
	}
	return nil
}

// writeArgs are the fields of a write request that its writer sets.
type writeArgs struct {
	op       opKind
	key      string
	value    []byte
	expected int64
	expires  int64
}

// write hands a request to the committer and waits for its answer.
func (s *Store) write(ctx context.Context, w writeArgs) (storage.KeyValue, error) {
	r := s.reqs.Get().(*writeReq)
	r.ctx, r.op, r.key, r.value, r.expected, r.expires = ctx, w.op, w.key, w.value, w.expected, w.expires
	op, key := w.op, w.key

	if err := s.enqueue(ctx, r); err != nil {
		r.reset()
		s.reqs.Put(r)
		return storage.KeyValue{}, err
	}
	select {
	case <-r.done:
		kv, err := r.result, r.err
		r.reset()
		s.reqs.Put(r)
		return kv, err
	case <-ctx.Done():
		// The committer may still apply it; the request is abandoned.
		return storage.KeyValue{}, fmt.Errorf("embedded: %s %q: outcome unknown: %w", op, key, ctx.Err())
	}
}

// enqueue puts r on the queue, blocking while it is full. It holds the read
// side of mu throughout, so Close cannot stop the committer before r is in
// the queue.
func (s *Store) enqueue(ctx context.Context, r *writeReq) error {
	if err := s.rlock(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	select {
	case s.queue <- r:
	default:
		select {
		case s.queue <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if want := s.paceWant.Load(); want > 0 && int64(len(s.queue)) >= want {
		select {
		case s.paceWake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (r *writeReq) reset() {
	done := r.done
	*r = writeReq{done: done}
}

func (op opKind) String() string {
	switch op {
	case opDelete:
		return "delete"
	case opExpire:
		return "expire"
	}
	return "put"
}

// errNotFound builds the error for a missing key.
func errNotFound(key string) error {
	return fmt.Errorf("%w: %q", storage.ErrNotFound, key)
}

// isCtxErr reports whether err came from a context.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
