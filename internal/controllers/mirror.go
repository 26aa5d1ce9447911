package controllers

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// Mirror keeps the current objects of one resource in every namespace,
// as a client-go informer's store and indexer do, fed by a Follower.
// Objects are the registry's, shared: never modified.
type Mirror struct {
	follower Follower
	changed  func(obj, old resources.Object) // see NewMirror
	// index, when set, groups the objects by the key it returns; an
	// object it returns false for is in no group.
	index func(obj resources.Object) (types.NamespacedName, bool)
	// Keep, when set before Run, chooses the objects held: changed still
	// hears of every object, but Get and ByIndex know only those it
	// returned true for at their last change, and those Observe recorded
	// since (a mirror of every Lease would keep every node's).
	Keep func(obj resources.Object) bool

	synced chan struct{} // closed after the first list: Synced

	mu sync.Mutex // guards objs, indexed and seen
	// objs holds the objects by namespace/name; indexed by index key,
	// then namespace/name.
	objs    map[types.NamespacedName]resources.Object
	indexed map[types.NamespacedName]map[types.NamespacedName]resources.Object
	// seen holds the keys a list in progress has brought; nil between
	// lists.
	seen map[types.NamespacedName]struct{}
}

// NewMirror returns a mirror of res. index, when not nil, groups the
// objects (ByIndex); changed is called, from Run's goroutine and with no
// lock held, with each object that changed (the last state of a deleted
// one) and the state the mirror held before (nil: none), and with every
// object after a list.
func NewMirror(reg *registry.Registry, res resources.Resource, log *slog.Logger, index func(resources.Object) (types.NamespacedName, bool), changed func(obj, old resources.Object)) *Mirror {
	m := &Mirror{
		index: index, changed: changed,
		synced: make(chan struct{}), objs: map[types.NamespacedName]resources.Object{}, indexed: map[types.NamespacedName]map[types.NamespacedName]resources.Object{},
	}
	m.follower = Follower{Registry: reg, Resource: res, Log: log, Listing: m.listing, Apply: m.apply}
	return m
}

// setLocked stores obj under k (nil: deletes k), keeping the index.
func (m *Mirror) setLocked(k types.NamespacedName, obj resources.Object) {
	if old, ok := m.objs[k]; ok && m.index != nil {
		if ik, ok := m.index(old); ok {
			delete(m.indexed[ik], k)
			if len(m.indexed[ik]) == 0 {
				delete(m.indexed, ik)
			}
		}
	}
	if obj == nil {
		delete(m.objs, k)
		return
	}
	m.objs[k] = obj
	if m.index == nil {
		return
	}
	if ik, ok := m.index(obj); ok {
		if m.indexed[ik] == nil {
			m.indexed[ik] = map[types.NamespacedName]resources.Object{}
		}
		m.indexed[ik][k] = obj
	}
}

// KeyOf is obj's namespace and name: a struct, not their
// "namespace/name" string, so that looking an object up allocates nothing
// (the mirror of Leases sees every renewal).
func KeyOf(obj resources.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Run keeps the mirror until ctx ends or the registry fails.
func (m *Mirror) Run(ctx context.Context) error { return m.follower.Run(ctx) }

func (m *Mirror) listing() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = map[types.NamespacedName]struct{}{}
}

// apply applies a batch of the follower's events; changed hears of each
// object, and of those a list found gone.
func (m *Mirror) apply(events []registry.Event) {
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				m.listed()
			}
			continue
		}
		obj := ev.Object.Object()
		k := KeyOf(obj)
		m.mu.Lock()
		if m.seen != nil {
			m.seen[k] = struct{}{}
		}
		old := m.objs[k]
		// The same state as held replaces it too: a write's answer
		// (Observe) gives way to the watch's object, which the
		// registry's cache shares, instead of being a copy held twice.
		if ev.Type == watch.Deleted || m.Keep != nil && !m.Keep(obj) {
			m.setLocked(k, nil)
		} else if old == nil || !newer(old, obj) {
			m.setLocked(k, obj)
		}
		m.mu.Unlock()
		m.changed(obj, old)
	}
}

// listed ends a list: objects it did not bring were deleted while no
// watch was open.
func (m *Mirror) listed() {
	m.mu.Lock()
	var gone []resources.Object
	for k, o := range m.objs {
		if _, ok := m.seen[k]; !ok {
			gone = append(gone, o)
			m.setLocked(k, nil)
		}
	}
	m.seen = nil
	m.mu.Unlock()
	for _, o := range gone {
		m.changed(o, o)
	}
	select {
	case <-m.synced:
	default:
		close(m.synced)
	}
}

// Observe records obj as the registry answered a write of it, unless the
// mirror already holds a newer state; the watch brings the same change
// later.
func (m *Mirror) Observe(obj resources.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := KeyOf(obj)
	if newer(obj, m.objs[k]) {
		m.setLocked(k, obj)
	}
}

// Get returns the object namespace/name, nil when there is none.
func (m *Mirror) Get(namespace, name string) resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs[types.NamespacedName{Namespace: namespace, Name: name}]
}

// All returns every object.
func (m *Mirror) All() []resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resources.Object, 0, len(m.objs))
	for _, o := range m.objs {
		out = append(out, o)
	}
	return out
}

// ByIndex returns the objects under index key ik.
func (m *Mirror) ByIndex(ik types.NamespacedName) []resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resources.Object, 0, len(m.indexed[ik]))
	for _, o := range m.indexed[ik] {
		out = append(out, o)
	}
	return out
}

// HasIndex reports whether any object is under index key ik.
func (m *Mirror) HasIndex(ik types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.indexed[ik]) > 0
}

// newer reports whether obj is a later state than old (nil: none).
func newer(obj, old resources.Object) bool {
	if old == nil {
		return true
	}
	a, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	b, _ := strconv.ParseInt(old.GetResourceVersion(), 10, 64)
	return a > b
}

// Synced is closed once the first list has been applied.
func (m *Mirror) Synced() <-chan struct{} { return m.synced }

// RunMirrored runs the mirrors and, once each has listed, work, until
// ctx ends or one of them fails.
func RunMirrored(ctx context.Context, mirrors []*Mirror, work func(ctx context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range mirrors {
		g.Go(func() error { return m.Run(gctx) })
	}
	g.Go(func() error {
		for _, m := range mirrors {
			select {
			case <-m.Synced():
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return work(gctx)
	})
	return g.Wait()
}
