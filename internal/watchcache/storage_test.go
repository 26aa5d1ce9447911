package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/storagetest"
)

// The storage conformance suite, run with every read served by a watch
// cache as the registry serves them: Get and List from a state at least as
// new as the store's revision (a consistent read), Watch from the cache's
// event window. Writes go to the store. Both engines run it.

// window is the event window of the caches under the suite: small, so
// that Compact overflows it quickly.
const window = 256

func TestStorageSuiteBehindCache(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		storagetest.RunTests(t, func(t *testing.T) storage.Interface {
			s, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return newCachedStore(t, s)
		}, storagetest.Options{MaxValueSize: embedded.DefaultMaxValueSize, Compact: overflowWindow})
	})
	t.Run("etcd", func(t *testing.T) {
		// etcd must accept a value of exactly the engine's limit.
		c := etcdtest.Start(t, etcdtest.Config{Args: []string{fmt.Sprintf("--max-request-bytes=%d", etcd.DefaultMaxValueSize+64<<10)}})
		raw := c.Client(t)
		storagetest.RunTests(t, func(t *testing.T) storage.Interface {
			if _, err := raw.Delete(t.Context(), "\x00", clientv3.WithFromKey()); err != nil {
				t.Fatalf("emptying etcd: %v", err)
			}
			s, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), CompactInterval: -1, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return newCachedStore(t, s)
		}, storagetest.Options{MaxValueSize: etcd.DefaultMaxValueSize, Compact: overflowWindow})
	})
}

// overflowWindow pushes rev out of the cache's window by writing more
// events than it holds, outside /registry/.
func overflowWindow(t *testing.T, s storage.Interface, rev int64) {
	t.Helper()
	var kv storage.KeyValue
	for range window + 1 {
		var err error
		if kv, err = s.Put(t.Context(), "/filler", []byte("x"), kv.ModRevision); err != nil {
			t.Fatalf("filler write: %v", err)
		}
	}
}

// raw is a cached key: its value and create revision, as stored.
type raw struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	value          []byte
	createRevision int64
}

func (r *raw) DeepCopyObject() runtime.Object { c := *r; return &c }

// cachedStore is a storage.Interface whose reads a watch cache of every
// key serves.
type cachedStore struct {
	store  storage.Interface
	cache  *Cache
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func newCachedStore(t *testing.T, store storage.Interface) *cachedStore {
	t.Helper()
	c := New(Config{Prefix: "/", Window: window, Decode: func(kv storage.KeyValue) (resources.Object, error) {
		return &raw{value: kv.Value, createRevision: kv.CreateRevision}, nil
	}})
	f := NewFeeder(store, "/", slog.New(slog.DiscardHandler), c)
	ctx, cancel := context.WithCancel(context.Background())
	cs := &cachedStore{store: store, cache: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cs.done)
		_ = f.Run(ctx)
	}()
	select {
	case <-f.Ready():
	case <-cs.done:
		t.Fatal("feeder ended before the first list")
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// consistent returns a state holding every write acknowledged before the
// call.
func (cs *cachedStore) consistent(ctx context.Context) (*State, error) {
	rev, err := cs.store.Revision(ctx)
	if err != nil {
		return nil, err
	}
	return cs.cache.WaitFor(ctx, rev)
}

func keyValue(o *Object) storage.KeyValue {
	r := o.Decoded().(*raw)
	return storage.KeyValue{Key: o.Key, Value: r.value, CreateRevision: r.createRevision, ModRevision: o.Rev}
}

func (cs *cachedStore) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	s, err := cs.consistent(ctx)
	if err != nil {
		return storage.KeyValue{}, err
	}
	o, ok := s.Get(key)
	if !ok {
		return storage.KeyValue{}, fmt.Errorf("%s: %w", key, storage.ErrNotFound)
	}
	return keyValue(o), nil
}

func (cs *cachedStore) List(ctx context.Context, prefix string) (storage.ListResult, error) {
	s, err := cs.consistent(ctx)
	if err != nil {
		return storage.ListResult{}, err
	}
	out := storage.ListResult{Revision: s.Rev}
	s.tree.AscendGreaterOrEqual(probe(prefix), func(o *Object) bool {
		if !strings.HasPrefix(o.Key, prefix) {
			return false
		}
		out.KVs = append(out.KVs, keyValue(o))
		return true
	})
	return out, nil
}

func (cs *cachedStore) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	return cs.store.Put(ctx, key, value, expected, opts...)
}

func (cs *cachedStore) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, error) {
	return cs.store.Delete(ctx, key, expected)
}

func (cs *cachedStore) Revision(ctx context.Context) (int64, error) {
	return cs.store.Revision(ctx)
}

func (cs *cachedStore) Close() error {
	var err error
	cs.once.Do(func() {
		cs.cancel()
		<-cs.done
		err = cs.store.Close()
	})
	return err
}

// Watch replays the cache's window after from, then follows it; a
// revision spent on keys outside prefix is reported as progress.
func (cs *cachedStore) Watch(ctx context.Context, prefix string, from int64) (storage.Watch, error) {
	if _, err := cs.store.Revision(ctx); err != nil {
		return nil, err
	}
	// The cache may lag the store: wait until it has seen from, as the
	// registry does, so that the cursor starts after it.
	if _, err := cs.cache.WaitFor(ctx, from); err != nil {
		return nil, err
	}
	cur, err := cs.cache.CursorAfter(from)
	if errors.Is(err, ErrExpired) {
		return nil, fmt.Errorf("watch from %d: %w", from, storage.ErrCompacted)
	}
	if err != nil {
		return nil, err
	}
	w := &cachedWatch{events: make(chan storage.Event), closed: cs.done}
	go w.run(ctx, cur, prefix, from)
	return w, nil
}

type cachedWatch struct {
	events chan storage.Event
	err    error // set before events is closed
	// closed is closed with the store: its watches end.
	closed <-chan struct{}
}

func (w *cachedWatch) Events() <-chan storage.Event { return w.events }
func (w *cachedWatch) Err() error                   { return w.err }

func (w *cachedWatch) run(ctx context.Context, cur *Cursor, prefix string, seen int64) {
	defer close(w.events)
	send := func(ev storage.Event) bool {
		select {
		case w.events <- ev:
			return true
		case <-ctx.Done():
			return false
		case <-w.closed:
			w.err = storage.ErrUnavailable
			return false
		}
	}
	buf := make([]Event, 0, 64)
	for {
		events, rev, wake, err := cur.Read(buf[:0])
		if err != nil {
			w.err = err
			return
		}
		for _, ev := range events {
			if !strings.HasPrefix(ev.Object.Key, prefix) {
				continue
			}
			out := storage.Event{Type: storage.EventPut, KV: keyValue(ev.Object), Revision: ev.Rev}
			if ev.Type == "DELETED" {
				out = storage.Event{Type: storage.EventDelete, KV: storage.KeyValue{Key: ev.Object.Key, ModRevision: ev.Rev}, Revision: ev.Rev}
			}
			if !send(out) {
				return
			}
		}
		if rev > seen {
			seen = rev
			if !send(storage.Event{Type: storage.EventProgress, Revision: rev}) {
				return
			}
		}
		if len(events) == cap(buf) {
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		case <-w.closed:
			w.err = storage.ErrUnavailable
			return
		}
	}
}
