package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// expireInterval is how often the feeder drops what the caches keep
// beyond their retention.
const expireInterval = 10 * time.Second

// Feeder fills caches from a store: one list of the whole key space, then
// one watch. When the watch fails it lists again and rebuilds every cache.
type Feeder struct {
	store  storage.Interface
	prefix string
	// caches sorted by descending prefix length, so that routing picks the
	// most specific prefix.
	caches []*Cache
	log    *slog.Logger

	readyOnce sync.Once
	ready     chan struct{}
}

// NewFeeder returns a feeder of caches from the keys of store under prefix.
func NewFeeder(store storage.Interface, prefix string, log *slog.Logger, caches ...*Cache) *Feeder {
	sorted := append([]*Cache(nil), caches...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i].cfg.Prefix) > len(sorted[j].cfg.Prefix) })
	return &Feeder{store: store, prefix: prefix, caches: sorted, log: log, ready: make(chan struct{})}
}

// Ready is closed once every cache holds a first list.
func (f *Feeder) Ready() <-chan struct{} { return f.ready }

// Run feeds the caches until ctx ends.
func (f *Feeder) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := f.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		f.log.Warn("watch cache feed interrupted; listing again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (f *Feeder) runOnce(ctx context.Context) error {
	list, err := f.store.List(ctx, f.prefix)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	parts := make(map[*Cache][]storage.KeyValue, len(f.caches))
	for _, kv := range list.KVs {
		if c := f.route(kv.Key); c != nil {
			parts[c] = append(parts[c], kv)
		}
	}
	for _, c := range f.caches {
		if err := c.reset(parts[c], list.Revision); err != nil {
			return err
		}
	}
	f.readyOnce.Do(func() { close(f.ready) })

	w, err := f.store.Watch(ctx, f.prefix, list.Revision)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	pending := make(map[*Cache][]Event, len(f.caches))
	expire := time.NewTicker(expireInterval)
	defer expire.Stop()
	for {
		var ev storage.Event
		var ok bool
		select {
		case ev, ok = <-w.Events():
		case <-expire.C:
			for _, c := range f.caches {
				c.expire()
			}
			continue
		}
		if !ok {
			if err := w.Err(); err != nil {
				return err
			}
			return errors.New("watch closed")
		}
		// Apply everything already queued, then publish once: readers see
		// whole batches and each cache clones its tree once per batch.
		rev := ev.Revision
		if err := f.apply(ev, pending); err != nil {
			return err
		}
	drain:
		for range 1024 {
			select {
			case ev, ok = <-w.Events():
				if !ok {
					break drain
				}
				rev = ev.Revision
				if err := f.apply(ev, pending); err != nil {
					return err
				}
			default:
				break drain
			}
		}
		for _, c := range f.caches {
			c.publish(rev, pending[c])
			pending[c] = pending[c][:0]
		}
	}
}

func (f *Feeder) apply(ev storage.Event, pending map[*Cache][]Event) error {
	if ev.Type == storage.EventProgress {
		return nil
	}
	c := f.route(ev.KV.Key)
	if c == nil {
		return nil
	}
	out, err := c.apply(ev)
	if err != nil {
		// A value that does not decode is corrupt data; skip it rather
		// than stop serving everything, as kube-apiserver does.
		f.log.Error("watch cache: dropping undecodable event", "err", err)
		return nil
	}
	pending[c] = append(pending[c], out)
	return nil
}

func (f *Feeder) route(key string) *Cache {
	for _, c := range f.caches {
		if strings.HasPrefix(key, c.cfg.Prefix) {
			return c
		}
	}
	return nil
}
