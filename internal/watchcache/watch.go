package watchcache

import (
	"errors"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/resources"
)

// ErrFellBehind ends a watcher whose position left the event window: it
// read too slowly, or the cache was rebuilt. Its client resumes from the
// last resourceVersion it saw (and gets 410 if that is gone too).
var ErrFellBehind = errors.New("watchcache: watcher fell behind the event window")

// Cursor is a watcher's position in a cache's event window. A Cursor is
// used by one goroutine.
type Cursor struct {
	c   *Cache
	pos int64
}

// CursorAfter returns a cursor at the first event after revision rev. It
// fails with ErrExpired when events after rev have left the window.
func (c *Cache) CursorAfter(rev int64) (*Cursor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, ok := c.events.find(rev)
	if !ok {
		return nil, ErrExpired
	}
	return &Cursor{c: c, pos: pos}, nil
}

// Oldest returns the revision just before the oldest event the cache can
// replay: a watch from an older revision is "too old".
func (c *Cache) Oldest() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events.base
}

// Read appends up to cap(buf)-len(buf) of the next events to buf. rev is
// the revision the watcher has caught up with once it has handled them:
// the last event's, or the cache's revision when no event is left, so a
// bookmark at rev never skips an event. wake is closed when there may be
// more. It fails with ErrFellBehind when the cursor left the window.
func (cur *Cursor) Read(buf []Event) (events []Event, rev int64, wake <-chan struct{}, err error) {
	c := cur.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cur.pos < c.events.start {
		return buf, 0, nil, ErrFellBehind
	}
	for cur.pos < c.events.end && len(buf) < cap(buf) {
		buf = append(buf, *c.events.at(cur.pos))
		cur.pos++
	}
	if cur.pos == c.events.end {
		if s := c.state.Load(); s != nil {
			rev = s.Rev
		}
	} else {
		rev = buf[len(buf)-1].Rev
		// The keys of one expiry share a revision (over etcd): the
		// watcher has it only once it has them all.
		if c.events.at(cur.pos).Rev == rev {
			rev--
		}
	}
	return buf, rev, c.fresh, nil
}

// Filter turns a cache event into the event a watcher with selector sel
// sees, as kube-apiserver's cacher does: an object that stops matching is
// DELETED (its previous state at the event's revision), one that starts
// matching is ADDED. ok is false when the watcher sees nothing.
//
// The result shares the cache event's memo: for one cache event the event
// type decides the object sent, so the memo keys frames by type.
func Filter(ev *Event, sel Selector) (out Event, ok bool) {
	if sel.Everything() {
		return *ev, true
	}
	cur := ev.Type != watch.Deleted && ev.Object.matches(sel)
	old := ev.Prev != nil && ev.Prev.matches(sel)
	switch {
	case cur && old:
		return *ev, true
	case cur:
		if ev.Type == watch.Added {
			return *ev, true
		}
		return Event{Type: watch.Added, Object: ev.Object, Rev: ev.Rev, Memo: ev.Memo}, true
	case old:
		if ev.Type == watch.Deleted {
			return *ev, true
		}
		return Event{Type: watch.Deleted, Object: ev.Prev.atRevision(ev.Rev), Prev: ev.Prev, Rev: ev.Rev, Memo: ev.Memo}, true
	}
	return Event{}, false
}

// atRevision returns a copy of o with resourceVersion rev. Its API
// object, when o keeps one, is copied shallowly: only its resourceVersion
// differs.
func (o *Object) atRevision(rev int64) *Object {
	c := &Object{Key: o.Key, Namespace: o.Namespace, Name: o.Name, Rev: rev, Labels: o.Labels, Stored: o.Stored, fields: o.fields, kind: o.kind, verbatim: o.verbatim}
	if d := o.decoded.Load(); d != nil {
		v := reflect.ValueOf(d.obj).Elem()
		nv := reflect.New(v.Type())
		nv.Elem().Set(v)
		obj := nv.Interface().(resources.Object)
		obj.SetResourceVersion(strconv.FormatInt(rev, 10))
		c.decoded.Store(&decoded{obj})
	}
	return c
}
