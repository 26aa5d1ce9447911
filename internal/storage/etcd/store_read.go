package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
)

// listAttempts is how many times List starts again when a page's revision
// was compacted while it read the pages before.
const listAttempts = 3

// Get returns the current value of key with a linearizable read.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd: get %q: %w", key, err)
	}
	defer end()
	defer s.observe("get", key, time.Now())
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return storage.KeyValue{}, s.mapErr(ctx, fmt.Sprintf("get %q", key), err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd: get %q: %w", key, storage.ErrNotFound)
	}
	return keyValue(resp.Kvs[0]), nil
}

// List returns every key under prefix at one linearizable revision: the
// first page is a linearizable read, the next ones read at its revision.
// Revision is that revision, the whole cluster's, whatever the prefix.
func (s *Store) List(ctx context.Context, prefix string) (storage.ListResult, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("etcd: list %q: %w", prefix, err)
	}
	defer end()
	defer s.observe("list", prefix, time.Now())
	for attempt := 1; ; attempt++ {
		res, err := s.list(ctx, prefix)
		if err != nil && errors.Is(err, rpctypes.ErrCompacted) && attempt < listAttempts && ctx.Err() == nil {
			s.log.Info("list: a page was compacted while listing; listing again", "prefix", prefix, "attempt", attempt)
			continue
		}
		if err != nil {
			return storage.ListResult{}, s.mapErr(ctx, fmt.Sprintf("list %q", prefix), err)
		}
		return res, nil
	}
}

func (s *Store) list(ctx context.Context, prefix string) (storage.ListResult, error) {
	from, rangeEnd := prefixRange(prefix)
	var res storage.ListResult
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(rangeEnd), clientv3.WithLimit(s.opts.pageSize)}
		if res.Revision != 0 {
			opts = append(opts, clientv3.WithRev(res.Revision))
		}
		resp, err := s.client.Get(ctx, from, opts...)
		if err != nil {
			return storage.ListResult{}, err
		}
		if res.Revision == 0 {
			res.Revision = resp.Header.Revision
			res.KVs = make([]storage.KeyValue, 0, len(resp.Kvs))
		}
		for _, kv := range resp.Kvs {
			res.KVs = append(res.KVs, keyValue(kv))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		// The smallest key after the last one listed.
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Revision returns etcd's current revision through a linearizable read, and
// has every watch of this engine that has not reported it yet ask etcd for a
// progress notification, so that a consistent read of the watch cache does
// not wait for etcd's own progress interval (see the package documentation).
//
// Calls share reads: a call joins the next read to be sent, which is sent
// after it began and so sees every write acknowledged before, and that read
// answers every call that joined it. Alone, a call's read is sent at once;
// under load one read answers all the calls that came while the last one
// was out, and a consistent GET costs etcd and this process less than a
// read of its own.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd: revision: %w", err)
	}
	defer end()
	defer s.observe("revision", "", time.Now())
	r := s.revisions.join(s.readRevision)
	select {
	case <-r.done:
	case <-ctx.Done():
		return 0, s.mapErr(ctx, "revision", ctx.Err())
	}
	if r.err != nil {
		return 0, r.err
	}
	s.progress.want(r.rev, true)
	return r.rev, nil
}

// readRevision is one read of etcd's revision, for every Revision call
// that joined it: within the store's life and request timeout, not any
// one caller's context.
func (s *Store) readRevision() (int64, error) {
	ctx, end, err := s.begin(context.Background())
	if err != nil {
		return 0, fmt.Errorf("etcd: revision: %w", err)
	}
	defer end()
	resp, err := s.client.Get(ctx, revisionProbeKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, s.mapErr(ctx, "revision", err)
	}
	return resp.Header.Revision, nil
}

// sharedReads coalesces the reads of Revision.
type sharedReads struct {
	mu sync.Mutex // guards out, next
	// out: a read is being sent; next is the one calls join meanwhile.
	out  bool
	next *sharedRead
}

// sharedRead is one read and the calls waiting for it.
type sharedRead struct {
	done chan struct{} // closed once rev and err are set
	rev  int64
	err  error
}

// join returns the read the caller waits for: the next one, sent at
// once when none is out.
func (q *sharedReads) join(read func() (int64, error)) *sharedRead {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next == nil {
		q.next = &sharedRead{done: make(chan struct{})}
	}
	r := q.next
	if !q.out {
		q.out, q.next = true, nil
		go q.send(r, read)
	}
	return r
}

// send does r's read, then sends the next one if calls joined it
// meanwhile.
func (q *sharedReads) send(r *sharedRead, read func() (int64, error)) {
	for r != nil {
		r.rev, r.err = read()
		close(r.done)
		q.mu.Lock()
		r, q.next = q.next, nil
		q.out = r != nil
		q.mu.Unlock()
	}
}

// prefixRange is the key range [from, end) of the keys under prefix; an
// empty prefix is every key.
func prefixRange(prefix string) (from, end string) {
	if prefix == "" {
		return "\x00", "\x00"
	}
	return prefix, clientv3.GetPrefixRangeEnd(prefix)
}

// keyValue converts an etcd key-value. The value is not copied: it was
// freshly decoded from the response and belongs to nothing else.
func keyValue(kv *mvccpb.KeyValue) storage.KeyValue {
	return storage.KeyValue{Key: string(kv.Key), Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
}
