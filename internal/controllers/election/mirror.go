package election

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// mirror keeps the current objects of one resource in every namespace,
// as a client-go informer's store does, fed by a controllers.Follower.
// Objects are the registry's, shared: never modified.
type mirror struct {
	follower controllers.Follower
	// changed is called, from run's goroutine and with no lock held, with
	// each object that changed (the last state of a deleted one), and with
	// every object after a list.
	changed func(obj resources.Object)
	// index, when set, groups the objects by the key it returns.
	index func(obj resources.Object) types.NamespacedName

	synced chan struct{} // closed after the first list

	mu sync.Mutex // guards objs, indexed and seen
	// objs holds the objects by namespace/name; indexed by index key,
	// then namespace/name.
	objs    map[types.NamespacedName]resources.Object
	indexed map[types.NamespacedName]map[types.NamespacedName]resources.Object
	// seen holds the keys a list in progress has brought; nil between
	// lists.
	seen map[types.NamespacedName]struct{}
}

func newMirror(reg *registry.Registry, res resources.Resource, log *slog.Logger, index func(resources.Object) types.NamespacedName, changed func(resources.Object)) *mirror {
	m := &mirror{
		index: index, changed: changed,
		synced: make(chan struct{}), objs: map[types.NamespacedName]resources.Object{}, indexed: map[types.NamespacedName]map[types.NamespacedName]resources.Object{},
	}
	m.follower = controllers.Follower{Registry: reg, Resource: res, Log: log, Listing: m.listing, Apply: m.apply}
	return m
}

// setLocked stores obj under k (nil: deletes k), keeping the index.
func (m *mirror) setLocked(k types.NamespacedName, obj resources.Object) {
	if old, ok := m.objs[k]; ok && m.index != nil {
		ik := m.index(old)
		delete(m.indexed[ik], k)
		if len(m.indexed[ik]) == 0 {
			delete(m.indexed, ik)
		}
	}
	if obj == nil {
		delete(m.objs, k)
		return
	}
	m.objs[k] = obj
	if m.index != nil {
		ik := m.index(obj)
		if m.indexed[ik] == nil {
			m.indexed[ik] = map[types.NamespacedName]resources.Object{}
		}
		m.indexed[ik][k] = obj
	}
}

// keyOf is obj's namespace and name: a struct, not their
// "namespace/name" string, so that looking an object up allocates nothing
// (the mirror of Leases sees every renewal).
func keyOf(obj resources.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// run keeps the mirror until ctx ends or the registry fails.
func (m *mirror) run(ctx context.Context) error { return m.follower.Run(ctx) }

func (m *mirror) listing() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = map[types.NamespacedName]struct{}{}
}

// apply applies a batch of the follower's events; changed hears of each
// object, and of those a list found gone.
func (m *mirror) apply(events []registry.Event) {
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				m.listed()
			}
			continue
		}
		obj := ev.Object.Obj
		k := keyOf(obj)
		m.mu.Lock()
		if m.seen != nil {
			m.seen[k] = struct{}{}
		}
		if ev.Type == watch.Deleted {
			m.setLocked(k, nil)
		} else if newer(obj, m.objs[k]) {
			m.setLocked(k, obj)
		}
		m.mu.Unlock()
		m.changed(obj)
	}
}

// listed ends a list: objects it did not bring were deleted while no
// watch was open.
func (m *mirror) listed() {
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
		m.changed(o)
	}
	select {
	case <-m.synced:
	default:
		close(m.synced)
	}
}

// observe records obj as the registry answered a write of it, unless the
// mirror already holds a newer state; the watch brings the same change
// later.
func (m *mirror) observe(obj resources.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := keyOf(obj)
	if newer(obj, m.objs[k]) {
		m.setLocked(k, obj)
	}
}

// get returns the object namespace/name, nil when there is none.
func (m *mirror) get(namespace, name string) resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs[types.NamespacedName{Namespace: namespace, Name: name}]
}

// all returns every object.
func (m *mirror) all() []resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resources.Object, 0, len(m.objs))
	for _, o := range m.objs {
		out = append(out, o)
	}
	return out
}

// byIndex returns the objects under index key ik.
func (m *mirror) byIndex(ik types.NamespacedName) []resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resources.Object, 0, len(m.indexed[ik]))
	for _, o := range m.indexed[ik] {
		out = append(out, o)
	}
	return out
}

// hasIndex reports whether any object is under index key ik.
func (m *mirror) hasIndex(ik types.NamespacedName) bool {
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
