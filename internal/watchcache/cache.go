package watchcache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// ErrExpired is returned for a read at a revision the cache no longer
// holds.
var ErrExpired = errors.New("watchcache: revision no longer available")

// Decoder turns a stored key's value into an API object whose
// resourceVersion is the key's ModRevision.
type Decoder func(kv storage.KeyValue) (resources.Object, error)

// Config configures a Cache.
type Config struct {
	// Prefix is the storage key prefix of the cached kind, ending in "/".
	Prefix string
	// Namespaced says keys are Prefix + NAMESPACE/NAME, not Prefix + NAME.
	Namespaced bool
	Decode     Decoder
	// Fields are the kind's selectable fields (the storage version's):
	// what a field selector can match without decoding.
	Fields resources.Fields
	// KeepDecoded keeps every object decoded, not only those of the
	// window's events (resources.Kind.ReadDecoded).
	KeepDecoded bool
	// Window is how many events the cache keeps for watches that resume
	// from a past revision.
	Window int
	// Snapshots is how many list snapshots are kept for paginated lists.
	Snapshots int
	// Retention is how long an event stays in the window, and a list
	// snapshot is kept, at most: so that what a burst of writes (an event
	// storm) leaves there does not keep its memory. Default
	// DefaultRetention.
	Retention time.Duration
	// Now is the clock of Retention; time.Now when nil.
	Now func() time.Time
}

// DefaultRetention is kube-apiserver's etcd compaction interval: there, a
// watch from, or a continue token of, a revision older than the last
// compaction fails with 410 too.
const DefaultRetention = 5 * time.Minute

// Cache is the in-memory copy of one resource.
type Cache struct {
	cfg  Config
	kind *kind

	// state is the latest published State.
	state atomic.Pointer[State]

	// work is the feeder's mutable tree; only the feeder goroutine touches
	// it. dirty says it changed since the last publish.
	work  *btree.BTreeG[*Object]
	dirty bool
	// labels shares label maps between the objects of work.
	labels *labelSets

	// mu guards the fields below. Watchers read the ring under the read
	// lock; the feeder and snapshot bookkeeping take the write lock.
	mu sync.RWMutex
	// events holds the recent events; watchers read it.
	events ring
	// fresh is closed and replaced whenever a new State is published.
	fresh chan struct{}
	// snapshots are States retained for paginated lists, newest last,
	// with the times they were retained.
	snapshots []retained
}

// retained is a snapshot kept for paginated lists.
type retained struct {
	state *State
	at    time.Time
}

// New returns an empty cache; a Feeder fills it.
func New(cfg Config) *Cache {
	if cfg.Window <= 0 {
		cfg.Window = 10000
	}
	if cfg.Snapshots <= 0 {
		cfg.Snapshots = 64
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{
		cfg:    cfg,
		kind:   newKind(cfg),
		work:   btree.NewG(32, lessObject),
		labels: newLabelSets(),
		fresh:  make(chan struct{}),
	}
	c.events.init(cfg.Window)
	return c
}

// Current returns the latest published state, nil before the first list.
func (c *Cache) Current() *State { return c.state.Load() }

// WaitFor returns a state at revision rev or later, waiting while the cache
// catches up. It fails with ctx's error if that takes too long.
func (c *Cache) WaitFor(ctx context.Context, rev int64) (*State, error) {
	for {
		c.mu.Lock()
		s, fresh := c.state.Load(), c.fresh
		c.mu.Unlock()
		if s != nil && s.Rev >= rev {
			return s, nil
		}
		select {
		case <-fresh:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// StateAt returns the state at exactly revision rev: a retained snapshot,
// or one rebuilt by undoing the window's events after rev. It fails with
// ErrExpired when rev is older than the window.
func (c *Cache) StateAt(rev int64) (*State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.state.Load()
	if cur == nil {
		return nil, ErrExpired
	}
	if rev > cur.Rev {
		return nil, fmt.Errorf("watchcache: revision %d is newer than %d", rev, cur.Rev)
	}
	for i := len(c.snapshots) - 1; i >= 0; i-- {
		if s := c.snapshots[i].state; s.Rev == rev {
			return s, nil
		}
	}
	// Every change after base is in the ring; the state at rev can be
	// rebuilt if rev is not older than base.
	if rev < c.events.base {
		return nil, ErrExpired
	}
	if rev == cur.Rev {
		return cur, nil
	}
	tree := cur.tree.Clone()
	for i := c.events.end - 1; i >= c.events.start; i-- {
		ev := c.events.at(i)
		if ev.Rev <= rev {
			break
		}
		switch ev.Type {
		case watch.Added:
			tree.Delete(ev.Object)
		default:
			tree.ReplaceOrInsert(ev.Prev)
		}
	}
	s := &State{Rev: rev, prefix: cur.prefix, namespaced: cur.namespaced, tree: tree}
	c.retainLocked(s)
	return s, nil
}

// Retain keeps s for later pages of a paginated list.
func (c *Cache) Retain(s *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retainLocked(s)
}

func (c *Cache) retainLocked(s *State) {
	for _, old := range c.snapshots {
		if old.state == s {
			return
		}
	}
	if len(c.snapshots) == c.cfg.Snapshots {
		copy(c.snapshots, c.snapshots[1:])
		c.snapshots[len(c.snapshots)-1] = retained{}
		c.snapshots = c.snapshots[:len(c.snapshots)-1]
	}
	c.snapshots = append(c.snapshots, retained{state: s, at: c.cfg.Now()})
}

// expire drops the window's events and the snapshots older than the
// retention (feeder only, which calls it now and then). A cursor left
// behind then fails with ErrFellBehind, and a list continuing a dropped
// snapshot answers 410, as after an etcd compaction in kube-apiserver.
func (c *Cache) expire() {
	cutoff := c.cfg.Now().Add(-c.cfg.Retention)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events.evictBefore(cutoff)
	drop := 0
	for drop < len(c.snapshots) && c.snapshots[drop].at.Before(cutoff) {
		drop++
	}
	if drop > 0 {
		n := copy(c.snapshots, c.snapshots[drop:])
		clear(c.snapshots[n:])
		c.snapshots = c.snapshots[:n]
	}
}

// reset replaces the whole content with kvs at revision rev (feeder only).
// Running watchers end: the events between the old and the new content
// are unknown.
func (c *Cache) reset(kvs []storage.KeyValue, rev int64) error {
	work := btree.NewG(32, lessObject)
	labels := newLabelSets()
	for _, kv := range kvs {
		// The decoded form is not kept: no event holds the object.
		o, err := c.decode(kv, false)
		if err != nil {
			return err
		}
		c.shareLabels(labels, o)
		work.ReplaceOrInsert(o)
	}
	c.work, c.labels = work, labels
	c.dirty = false
	s := &State{Rev: rev, prefix: c.cfg.Prefix, namespaced: c.cfg.Namespaced, tree: work.Clone()}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.events.reset(rev)
	c.snapshots = nil
	c.publishLocked(s)
	return nil
}

// apply applies one storage event of this resource (feeder only). It does
// not publish: publish does, once per batch.
func (c *Cache) apply(ev storage.Event) (Event, error) {
	var out Event
	switch ev.Type {
	case storage.EventPut:
		o, err := c.decode(ev.KV, true)
		if err != nil {
			return Event{}, err
		}
		// One walk of the tree puts o in and finds what it replaces; o
		// is not published before the batch is, so its labels may still
		// change.
		prev, hadPrev := c.work.ReplaceOrInsert(o)
		if hadPrev && maps.Equal(prev.Labels, o.Labels) {
			// The usual update (a renewal): keep the shared set as it is.
			o.setLabels(prev.Labels)
		} else {
			c.shareLabels(c.labels, o)
			if hadPrev {
				c.labels.release(prev.Labels)
			}
		}
		out = Event{Type: watch.Added, Object: o, Rev: ev.Revision}
		if hadPrev {
			out.Type, out.Prev = watch.Modified, prev
		}
	case storage.EventDelete:
		prev, hadPrev := c.work.Delete(probe(ev.KV.Key))
		if !hadPrev {
			return Event{}, fmt.Errorf("watchcache: delete of unknown key %s at %d", ev.KV.Key, ev.Revision)
		}
		c.labels.release(prev.Labels)
		// The DELETED event carries the last state at the delete revision.
		gone := prev.atRevision(ev.Revision)
		gone.keep() // while the event is in the window, as an update's
		out = Event{Type: watch.Deleted, Object: gone, Prev: prev, Rev: ev.Revision}
	default:
		return Event{}, fmt.Errorf("watchcache: unexpected event type %d", ev.Type)
	}
	c.dirty = true
	return out, nil
}

// shareLabels makes o use the shared map of its label set (feeder only:
// o is not published yet).
func (c *Cache) shareLabels(t *labelSets, o *Object) {
	o.setLabels(t.intern(o.Labels))
}

// publish makes the work tree and the events visible at revision rev
// (feeder only).
func (c *Cache) publish(rev int64, events []Event) {
	cur := c.state.Load()
	if cur != nil && rev <= cur.Rev && len(events) == 0 {
		return
	}
	s := &State{Rev: rev, prefix: c.cfg.Prefix, namespaced: c.cfg.Namespaced}
	if c.dirty || cur == nil {
		s.tree = c.work.Clone()
		c.dirty = false
	} else {
		s.tree = cur.tree
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	for _, ev := range events {
		c.events.push(ev, now)
	}
	c.publishLocked(s)
}

func (c *Cache) publishLocked(s *State) {
	c.state.Store(s)
	close(c.fresh)
	c.fresh = make(chan struct{})
}

// decode returns the cached object of kv, keeping its decoded form for
// an event (keep).
func (c *Cache) decode(kv storage.KeyValue, keep bool) (*Object, error) {
	ns, name := splitKey(c.cfg.Prefix, kv.Key, c.cfg.Namespaced)
	return c.kind.object(kv, ns, name, keep)
}
