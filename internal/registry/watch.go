package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// ErrFellBehind ends a watch whose reader fell behind the event window:
// its client resumes from the last resourceVersion it saw (and gets 410 if
// that is gone too).
var ErrFellBehind = watchcache.ErrFellBehind

// Event is one event of a watch.
type Event struct {
	Type watch.EventType
	// Object is the object (storage version, shared: never modify it);
	// empty for a bookmark.
	Object codec.Cached
	// Rev is the event's revision; for a bookmark, the revision the watch
	// has caught up with.
	Rev int64
	// InitialEnd marks the bookmark that ends a streaming list.
	InitialEnd bool
	// memo keeps the event's frames, shared by every watcher of it.
	memo *codec.EventMemo
}

// initialPage is how many initial events one Next returns at most, and
// how many events of the window one Next reads at most.
const initialPage = 256

// minBatch is how many events of the window a watch reads at once at
// first; a watch that finds more waiting doubles it, up to initialPage.
// Most watches see an event at a time, and a full batch would be 20 KB
// each (10 MB for 500 watchers).
const minBatch = 8

// Watch is a running watch of a resource: first, when asked for, the
// objects of a state as ADDED events (then, for a streaming list with
// bookmarks, the bookmark that ends them); then every change that its
// selectors select, in revision order, with a bookmark every interval
// when asked for, until its timeout. A Watch is used by one goroutine;
// Stop releases it.
type Watch struct {
	res resources.Resource
	sel watchcache.Selector
	// initial is the state whose objects are still to be sent, from the
	// key from on; nil once they are.
	initial    *watchcache.State
	from       string
	initialEnd bool
	bookmarks  bool
	cursor     *watchcache.Cursor
	// caughtUp is the revision the watch has seen every change up to.
	caughtUp int64

	end      *time.Timer
	deadline time.Time
	interval time.Duration
	bookmark *time.Timer

	batch  []watchcache.Event
	out    []Event
	frames [][]byte
	// more says the last Next left events it could have read: a full
	// batch from the window, or a page of initial events with more.
	more bool
}

// More reports whether more events may be waiting already: the last
// Next read as many as it could at once.
func (w *Watch) More() bool { return w.more }

// Watch starts a watch with kube-apiserver's resourceVersion rules: from
// revision N it replays every later change; without one (or "0") it first
// sends the current objects; sendInitialEvents=true streams a list, then a
// bookmark. name is set for single-object watches. The watch ends at
// opts.TimeoutSeconds, or else after a random time between the minimum
// watch timeout and twice that. A revision older than the event window
// fails with a 410 Expired error, which the caller sends as an ERROR
// event.
func (r *Registry) Watch(ctx context.Context, res resources.Resource, namespace, name string, opts *metainternalversion.ListOptions) (*Watch, error) {
	if name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); !ok || selected != name {
				return nil, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
		}
	}
	sel, err := r.selector(res, namespace, opts)
	if err != nil {
		return nil, err
	}
	rv, err := parseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	w := &Watch{res: res, sel: sel, bookmarks: opts.AllowWatchBookmarks}
	if err := r.startWatch(ctx, w, opts, rv); err != nil {
		return nil, err
	}
	timeout := r.watch.minTimeout + time.Duration(rand.Int64N(int64(r.watch.minTimeout)))
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	w.deadline = time.Now().Add(timeout)
	w.end = time.NewTimer(timeout)
	if w.bookmarks {
		w.interval = r.watch.bookmarkInterval
		w.bookmark = time.NewTimer(w.nextBookmark())
	}
	w.batch = make([]watchcache.Event, 0, minBatch)
	return w, nil
}

// startWatch positions w: its initial state and its cursor.
func (r *Registry) startWatch(ctx context.Context, w *Watch, opts *metainternalversion.ListOptions, rv int64) error {
	c := r.cache(w.res.Kind)
	fromState := func() error {
		s, err := r.stateNotOlderThan(ctx, w.res, opts.ResourceVersion, rv)
		if err != nil {
			return err
		}
		w.initial = s
		w.caughtUp = s.Rev
		if w.cursor, err = c.CursorAfter(s.Rev); err != nil {
			// The state is newer than the window's start; this only happens
			// if the cache was rebuilt meanwhile.
			return apierrors.NewServiceUnavailable("the watch cache was rebuilt; retry")
		}
		return nil
	}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		w.initialEnd = true
		return fromState()
	case opts.SendInitialEvents != nil && rv == 0:
		// sendInitialEvents=false without a revision: changes from now.
		err := fromState()
		w.initial = nil
		return err
	case opts.SendInitialEvents == nil && rv == 0:
		// Legacy watch without a revision: the current objects, then
		// changes (no bookmark marks the end).
		return fromState()
	}
	if cur := c.Current(); cur == nil || cur.Rev < rv {
		if _, err := r.waitFor(ctx, c, rv); err != nil {
			return err
		}
	}
	w.caughtUp = rv
	var err error
	w.cursor, err = c.CursorAfter(rv)
	if errors.Is(err, watchcache.ErrExpired) {
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, c.Oldest()))
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return nil
}

// Stop releases the watch's timers.
func (w *Watch) Stop() {
	w.end.Stop()
	if w.bookmark != nil {
		w.bookmark.Stop()
	}
}

// Next waits for what the watch sends next and returns it: a page of
// initial events, a batch of changes, or a bookmark. The slice is reused
// by the next call. It returns io.EOF when the watch reaches its
// timeout, ErrFellBehind when the
// watch fell behind the event window, and ctx's error when ctx ends.
func (w *Watch) Next(ctx context.Context) ([]Event, error) {
	w.out = w.out[:0]
	if w.initial != nil {
		page := w.initial.List(w.sel, w.from, initialPage)
		for _, o := range page.Objects {
			w.out = append(w.out, Event{Type: watch.Added, Object: o.Cached(), Rev: o.Rev})
		}
		w.more = page.Next != ""
		if page.Next != "" {
			w.from = page.Next
			return w.out, nil
		}
		w.initial = nil
		if w.initialEnd && w.bookmarks {
			w.out = append(w.out, Event{Type: watch.Bookmark, Rev: w.caughtUp, InitialEnd: true})
		}
		if len(w.out) > 0 {
			return w.out, nil
		}
	}
	var bookmarkC <-chan time.Time
	if w.bookmark != nil {
		bookmarkC = w.bookmark.C
	}
	for {
		events, rev, wake, err := w.cursor.Read(w.batch[:0])
		if err != nil {
			return nil, err
		}
		for i := range events {
			if ev, ok := watchcache.Filter(&events[i], w.sel); ok {
				w.out = append(w.out, Event{Type: ev.Type, Object: ev.Object.Cached(), Rev: ev.Rev, memo: ev.Memo})
			}
		}
		w.caughtUp = rev
		full := len(events) == cap(w.batch)
		w.more = full
		if full && cap(w.batch) < initialPage {
			w.batch = make([]watchcache.Event, 0, 2*cap(w.batch))
		}
		if len(w.out) > 0 {
			return w.out, nil
		}
		if full {
			continue
		}
		select {
		case <-wake:
		case <-bookmarkC:
			w.bookmark.Reset(w.nextBookmark())
			w.out = append(w.out, Event{Type: watch.Bookmark, Rev: w.caughtUp})
			return w.out, nil
		case <-w.end.C:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// NextFrames is Next with each event encoded and framed by enc, ready to
// be written. The slice is reused by the next call.
func (w *Watch) NextFrames(ctx context.Context, enc *codec.WatchEncoder) ([][]byte, error) {
	events, err := w.Next(ctx)
	w.frames = w.frames[:0]
	if err != nil {
		return nil, err
	}
	for _, ev := range events {
		var frame []byte
		if ev.Type == watch.Bookmark {
			frame, err = enc.Bookmark(ev.Rev, ev.InitialEnd)
		} else {
			frame, err = enc.Event(ev.Type, ev.Object, ev.memo)
		}
		if err != nil {
			return nil, err
		}
		w.frames = append(w.frames, frame)
	}
	return w.frames, nil
}

// nextBookmark returns when to send the next bookmark: an interval from
// now, or just before the watch ends so the client learns the latest
// revision.
func (w *Watch) nextBookmark() time.Duration {
	d := w.interval
	if untilEnd := time.Until(w.deadline) - 2*time.Second; untilEnd > 0 && untilEnd < d {
		d = untilEnd
	}
	return d
}
