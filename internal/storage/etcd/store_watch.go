package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
)

// watchBuffer is the capacity of a watch's Events channel. When it is full
// the watch's goroutine waits for the consumer; meanwhile the etcd client
// library queues what the stream delivers (it has no bound of its own), so
// a consumer must keep reading, as the watch cache's feeder does.
const watchBuffer = 128

// Watch streams the changes under prefix after revision from, from an etcd
// watch of its own. See storage.Interface and the package documentation.
//
// It first reads at revision from to fail synchronously with
// storage.ErrCompacted when that history is gone (one revision stricter
// than the watch needs: from itself may be compacted as long as from+1 is
// not; the caller then lists again, as after any compaction); from beyond
// the current revision is allowed. Events are delivered in etcd's order with
// their etcd revisions; progress notes come from etcd's progress
// notifications, which the engine requests (see Revision).
func (s *Store) Watch(ctx context.Context, prefix string, from int64) (storage.Watch, error) {
	op := fmt.Sprintf("watch %q from %d", prefix, from)
	if from < 0 {
		return nil, fmt.Errorf("etcd: %s: negative revision", op)
	}
	if err := s.checkAvailable(ctx, op, from); err != nil {
		return nil, err
	}

	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("etcd: %s: %w", op, errClosed)
	}
	s.active.Add(1)
	s.mu.RUnlock()

	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(errClosed) })
	w := &watch{
		s:      s,
		prefix: prefix,
		from:   from,
		out:    make(chan storage.Event, watchBuffer),
		// The same metadata must reach Watch and RequestProgress: the
		// client library keys its streams by it.
		ctx: clientv3.WithRequireLeader(wctx),
	}
	w.reported.Store(from)
	go func() {
		defer s.active.Done()
		defer cancel(nil)
		defer stop()
		w.run(wctx)
	}()
	return w, nil
}

// checkAvailable fails with storage.ErrCompacted if revision rev has been
// compacted. A revision in the future is fine. (The usual case, a read at
// the current revision, succeeds, so the client logs no failure.)
func (s *Store) checkAvailable(ctx context.Context, op string, rev int64) error {
	if rev == 0 {
		rev = 1 // a read at revision 0 would read the present
	}
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcd: %s: %w", op, err)
	}
	defer end()
	_, err = s.client.Get(ctx, revisionProbeKey, clientv3.WithRev(rev), clientv3.WithCountOnly())
	if err == nil || errors.Is(err, rpctypes.ErrFutureRev) {
		return nil
	}
	return s.mapErr(ctx, op, err)
}

// watch is one running watch.
type watch struct {
	s      *Store
	prefix string
	from   int64
	out    chan storage.Event
	// ctx is the etcd watch's context, carrying the require-leader
	// metadata; requestProgress uses it to reach the same stream.
	ctx context.Context
	// cw is the watch's own etcd watcher; set before established.
	cw clientv3.Watcher

	// established is set once etcd has created the watch: progress
	// requests before that would be lost.
	established atomic.Bool
	// blocked is set while the goroutine waits for the consumer.
	blocked atomic.Bool
	// reported is the highest revision delivered, as an event or a
	// progress note (from, at first); advanced is when (UnixNano).
	reported atomic.Int64
	advanced atomic.Int64
	// askedFor and askedAt are the target and time of the last progress
	// request; only the progress requester's goroutine uses them.
	askedFor int64
	askedAt  time.Time

	mu  sync.Mutex // guards err
	err error
}

func (w *watch) Events() <-chan storage.Event { return w.out }

// Err returns why the watch ended: nil if its ctx ended; an error wrapping
// storage.ErrCompacted if etcd compacted the revisions it still had to
// deliver; one wrapping storage.ErrUnavailable if the store closed or etcd
// ended the watch (no leader, the client closed). Nil while running.
func (w *watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *watch) run(ctx context.Context) {
	w.cw = clientv3.NewWatcher(w.s.client)
	w.s.progress.add(w)
	err := w.loop(ctx)
	w.s.progress.remove(w)
	if cerr := w.cw.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
		w.s.log.Debug("closing a watcher", "prefix", w.prefix, "err", cerr)
	}
	if err != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errClosed):
			err = fmt.Errorf("etcd: watch %q: %w", w.prefix, errClosed)
		case ctx.Err() != nil:
			err = nil // the consumer ended the watch
		}
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.out)
}

// loop delivers events until ctx ends or the etcd watch fails.
func (w *watch) loop(ctx context.Context) error {
	ch := w.cw.Watch(w.ctx, w.prefixKey(), w.options()...)
	// Watch returns once etcd has created the watch, or a closed channel.
	w.established.Store(true)
	w.s.progress.poke()
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("etcd: watch %q: the etcd watch closed: %w", w.prefix, storage.ErrUnavailable)
		}
		if err := resp.Err(); err != nil {
			return wrapErr(fmt.Sprintf("watch %q", w.prefix), err)
		}
		if resp.IsProgressNotify() {
			// A member's revision; one behind what this watch has
			// already delivered (after a reconnection to a lagging
			// member) says nothing new.
			if rev := resp.Header.GetRevision(); rev > w.reported.Load() {
				if err := w.send(ctx, storage.Event{Type: storage.EventProgress, Revision: rev}); err != nil {
					return err
				}
			}
			continue
		}
		for _, ev := range resp.Events {
			e, err := event(ev)
			if err != nil {
				return fmt.Errorf("etcd: watch %q: %w", w.prefix, err)
			}
			if err := w.send(ctx, e); err != nil {
				return err
			}
		}
	}
}

func (w *watch) prefixKey() string {
	from, _ := prefixRange(w.prefix)
	return from
}

func (w *watch) options() []clientv3.OpOption {
	opts := []clientv3.OpOption{
		clientv3.WithRev(w.from + 1),
		clientv3.WithProgressNotify(),
	}
	if w.prefix == "" {
		return append(opts, clientv3.WithFromKey())
	}
	return append(opts, clientv3.WithPrefix())
}

// send delivers ev, waiting for the consumer if the buffer is full.
func (w *watch) send(ctx context.Context, ev storage.Event) error {
	select {
	case w.out <- ev:
	default:
		w.blocked.Store(true)
		defer w.blocked.Store(false)
		select {
		case w.out <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.reported.Store(ev.Revision)
	w.advanced.Store(time.Now().UnixNano())
	return nil
}

// requestProgress asks etcd for a progress notification on this watch's
// stream. Failures are only logged: the requester asks again while the
// watch lags.
func (w *watch) requestProgress(ctx context.Context) {
	rctx, cancel := context.WithTimeout(w.ctx, progressRequestTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if err := w.cw.RequestProgress(rctx); err != nil && w.ctx.Err() == nil && ctx.Err() == nil {
		w.s.log.Debug("requesting watch progress", "prefix", w.prefix, "err", err)
	}
}

// event converts an etcd watch event. The watch asks for no previous
// values (kube-apiserver's does, WithPrevKV, for its own cache's sake): a
// delete carries only the key and its revision, which is all
// storage.Event promises.
func event(ev *clientv3.Event) (storage.Event, error) {
	switch ev.Type {
	case mvccpb.PUT:
		return storage.Event{Type: storage.EventPut, KV: keyValue(ev.Kv), Revision: ev.Kv.ModRevision}, nil
	case mvccpb.DELETE:
		kv := storage.KeyValue{Key: string(ev.Kv.Key), ModRevision: ev.Kv.ModRevision}
		return storage.Event{Type: storage.EventDelete, KV: kv, Revision: ev.Kv.ModRevision}, nil
	default:
		return storage.Event{}, fmt.Errorf("event of unknown type %v on %q", ev.Type, ev.Kv.Key)
	}
}
