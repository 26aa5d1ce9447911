package election

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// mirror keeps the current objects of one resource in every namespace,
// as a client-go informer's store does: it lists them, then follows a
// watch from the list's revision, and lists again when the watch falls
// too far behind. Objects are the registry's, shared: never modified.
type mirror struct {
	reg *registry.Registry
	res resources.Resource
	// changed is called, from run's goroutine and with no lock held, with
	// each object that changed (the last state of a deleted one), and with
	// every object after a list.
	changed func(obj resources.Object)
	// index, when set, groups the objects by the key it returns.
	index func(obj resources.Object) string

	synced chan struct{} // closed after the first list

	mu sync.Mutex // guards objs and indexed
	// objs holds the objects by namespace/name; indexed by index key,
	// then namespace/name.
	objs    map[string]resources.Object
	indexed map[string]map[string]resources.Object
}

func newMirror(reg *registry.Registry, res resources.Resource, index func(resources.Object) string, changed func(resources.Object)) *mirror {
	return &mirror{
		reg: reg, res: res, index: index, changed: changed,
		synced: make(chan struct{}), objs: map[string]resources.Object{}, indexed: map[string]map[string]resources.Object{},
	}
}

// setLocked stores obj under k (nil: deletes k), keeping the index.
func (m *mirror) setLocked(k string, obj resources.Object) {
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
			m.indexed[ik] = map[string]resources.Object{}
		}
		m.indexed[ik][k] = obj
	}
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

// run keeps the mirror until ctx ends or the registry fails.
func (m *mirror) run(ctx context.Context) error {
	first := true
	for {
		rev, err := m.list(ctx)
		if err != nil {
			return err
		}
		if first {
			close(m.synced)
			first = false
		}
		if err := m.follow(ctx, rev); err != nil {
			return err
		}
	}
}

// list replaces the mirror's objects with a fresh list and returns its
// revision.
func (m *mirror) list(ctx context.Context) (int64, error) {
	l, err := m.reg.List(ctx, m.res, "", &metainternalversion.ListOptions{})
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	old := m.objs
	m.objs, m.indexed = make(map[string]resources.Object, len(l.Items)), map[string]map[string]resources.Object{}
	for _, it := range l.Items {
		m.setLocked(objectKey(it.Obj.GetNamespace(), it.Obj.GetName()), it.Obj)
	}
	objs := m.objs
	m.mu.Unlock()
	for _, o := range objs {
		m.changed(o)
	}
	for k, o := range old {
		if _, ok := objs[k]; !ok {
			m.changed(o) // deleted while not watched
		}
	}
	return l.ResourceVersion, nil
}

// follow applies the watch's changes from rev until the watch can no
// longer resume (nil: list again) or ctx ends.
func (m *mirror) follow(ctx context.Context, rev int64) error {
	for {
		w, err := m.reg.Watch(ctx, m.res, "", "", &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(rev, 10)})
		if apierrors.IsResourceExpired(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rev, err = m.apply(ctx, w, rev)
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, registry.ErrFellBehind):
			return nil
		case err != nil && !errors.Is(err, io.EOF):
			return err
		}
		// The watch timed out (io.EOF): resume from rev.
	}
}

// apply applies w's events and returns the revision it reached.
func (m *mirror) apply(ctx context.Context, w *registry.Watch, rev int64) (int64, error) {
	for {
		events, err := w.Next(ctx)
		if err != nil {
			return rev, err
		}
		for _, ev := range events {
			rev = max(rev, ev.Rev)
			if ev.Type == watch.Bookmark {
				continue
			}
			obj := ev.Object.Obj
			k := objectKey(obj.GetNamespace(), obj.GetName())
			m.mu.Lock()
			if ev.Type == watch.Deleted {
				m.setLocked(k, nil)
			} else if newer(obj, m.objs[k]) {
				m.setLocked(k, obj)
			}
			m.mu.Unlock()
			m.changed(obj)
		}
	}
}

// observe records obj as the registry answered a write of it, unless the
// mirror already holds a newer state; the watch brings the same change
// later.
func (m *mirror) observe(obj resources.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := objectKey(obj.GetNamespace(), obj.GetName())
	if newer(obj, m.objs[k]) {
		m.setLocked(k, obj)
	}
}

// get returns the object namespace/name, nil when there is none.
func (m *mirror) get(namespace, name string) resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs[objectKey(namespace, name)]
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
func (m *mirror) byIndex(ik string) []resources.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resources.Object, 0, len(m.indexed[ik]))
	for _, o := range m.indexed[ik] {
		out = append(out, o)
	}
	return out
}

// hasIndex reports whether any object is under index key ik.
func (m *mirror) hasIndex(ik string) bool {
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
