package embedded

import (
	"context"
	"fmt"
	"sync"

	"github.com/leasehold/leasehold/internal/storage"
)

const (
	// watchBuffer is the capacity of a watch's Events channel. When it is
	// full the watcher's goroutine waits (only it: the committer never
	// waits for watchers), its cursor falls behind, and if the history
	// overwrites its cursor the watch ends with storage.ErrCompacted.
	watchBuffer = 128
	// watchScan is how many revisions a watcher looks at per lock of the
	// history.
	watchScan = 256
)

// Watch streams the changes under prefix after revision from. See
// storage.Interface.
//
// The watch replays from the in-memory history (Options.History events,
// at most Options.HistoryBytes) and then follows new commits; events are
// delivered only once durable. from older than the history fails with
// storage.ErrCompacted; from in the future is allowed and delivers changes
// after it. Each watch has a goroutine that pulls from the history, so a
// slow consumer delays only itself; one that falls out of the history ends
// with storage.ErrCompacted.
//
// Progress notes: whenever a watcher has looked at every committed revision
// (it is caught up) and the newest one, N, is above the last event or note
// it delivered, it sends EventProgress with Revision N. So a watcher learns
// of revisions spent on other prefixes as soon as it catches up after each
// commit, once per catch-up, never while it is behind, and never twice for
// the same revision. A consumer that reads slowly gets fewer, later notes.
//
// The events' values are shared with other watchers and with the writer:
// they must not be modified.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) (storage.Watch, error) {
	if from < 0 {
		return nil, fmt.Errorf("embedded: watch %q: negative revision %d", prefix, from)
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if !s.hist.available(from) {
		return nil, fmt.Errorf("%w: watch %q from revision %d", storage.ErrCompacted, prefix, from)
	}
	w := &watcher{s: s, prefix: prefix, from: from, out: make(chan storage.Event, watchBuffer)}
	s.watchers.Add(1) // under mu, so never after Close's Wait has begun
	go w.run(ctx)
	return w, nil
}

// watcher is one running watch.
type watcher struct {
	s      *Store
	prefix string
	from   int64
	out    chan storage.Event

	mu  sync.Mutex // guards err
	err error
}

func (w *watcher) Events() <-chan storage.Event { return w.out }

// Err returns why the watch ended: nil if its ctx ended, an error wrapping
// storage.ErrCompacted if it fell out of the history, one wrapping
// storage.ErrUnavailable if the store failed or closed. Nil while running.
func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *watcher) run(ctx context.Context) {
	defer w.s.watchers.Done()
	err := w.loop(ctx)
	if isCtxErr(err) && ctx.Err() != nil {
		err = nil // the consumer ended the watch
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.out)
}

// loop delivers events until ctx or the store ends, or the watcher falls
// out of the history.
func (w *watcher) loop(ctx context.Context) error {
	var (
		cursor   = w.from // every revision up to cursor has been looked at
		reported = w.from // every revision up to here has been delivered or noted
		buf      []storage.Event
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := w.s.hist.read(cursor, w.prefix, buf[:0], watchScan)
		if err != nil {
			return err
		}
		for _, ev := range res.events {
			if err := w.send(ctx, ev); err != nil {
				return err
			}
			reported = ev.Revision
		}
		clear(res.events) // do not keep values alive in buf
		buf = res.events
		cursor = res.scanned
		if cursor < res.newest {
			continue // more to look at
		}
		if reported < cursor {
			if err := w.send(ctx, storage.Event{Type: storage.EventProgress, Revision: cursor}); err != nil {
				return err
			}
			reported = cursor
		}
		select {
		case <-res.notify:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.s.ctx.Done():
			return w.s.Err()
		}
	}
}

func (w *watcher) send(ctx context.Context, ev storage.Event) error {
	select {
	case w.out <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.s.ctx.Done():
		return w.s.Err()
	}
}
