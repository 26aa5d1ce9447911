package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/openapi"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// Config configures a Registry.
type Config struct {
	Store storage.Interface
	// Prefix is the storage key prefix, "/registry" by default.
	Prefix string
	// Kinds are the served kinds: New builds their codecs and OpenAPI
	// documents, whose definitions drive managedFields and server-side
	// apply.
	Kinds []*resources.Kind
	// Admission runs on every create, update and delete, in order.
	Admission admission.Chain
	// WatchWindow is the number of events kept per kind for watches that
	// resume from a past revision; 0 means 10,000.
	WatchWindow int
	// MinWatchTimeout is the shortest life of a watch that gives no
	// timeoutSeconds: each lasts a random time between it and twice it;
	// 0 means kube-apiserver's 1800 s.
	MinWatchTimeout time.Duration
	// BookmarkInterval is how often a watch with allowWatchBookmarks gets
	// a bookmark; 0 means a minute, as kube-apiserver.
	BookmarkInterval time.Duration
	Logger           *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Registry serves the verbs of every configured kind.
type Registry struct {
	store     storage.Interface
	codecs    *codec.Codecs
	prefix    string
	admission admission.Chain
	log       *slog.Logger
	now       func() time.Time
	watch     watchSettings

	typeConverter managedfields.TypeConverter
	compare       *comparer
	openapi       *openapi.Service

	kinds []*resources.Kind
	// state holds each kind's cache and field managers.
	state map[*resources.Kind]*kindState
	// byGVR finds what a request path names.
	byGVR  map[schema.GroupVersionResource]resources.Resource
	feeder *watchcache.Feeder
}

// kindState is what the registry keeps per kind.
type kindState struct {
	cache *watchcache.Cache
	// fieldManagers track managedFields per served version and
	// subresource.
	fieldManagers map[fieldManagerKey]*managedfields.FieldManager
	// owners remembers the objects the managedFields fast path may take.
	owners soleOwners
}

// watchSettings are the timings of watches.
type watchSettings struct {
	minTimeout       time.Duration
	bookmarkInterval time.Duration
}

// New returns a registry. Run must be running for reads to be served.
func New(cfg Config) (*Registry, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/registry"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MinWatchTimeout == 0 {
		cfg.MinWatchTimeout = 1800 * time.Second
	}
	if cfg.BookmarkInterval == 0 {
		cfg.BookmarkInterval = time.Minute
	}
	codecs, err := codec.New(cfg.Kinds)
	if err != nil {
		return nil, err
	}
	docs, err := openapi.New(cfg.Kinds)
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI documents: %w", err)
	}
	typeConverter, err := docs.TypeConverter()
	if err != nil {
		return nil, fmt.Errorf("building the type converter: %w", err)
	}
	r := &Registry{
		store:         cfg.Store,
		codecs:        codecs,
		openapi:       docs,
		prefix:        cfg.Prefix,
		admission:     cfg.Admission,
		log:           cfg.Logger,
		now:           cfg.Now,
		watch:         watchSettings{minTimeout: cfg.MinWatchTimeout, bookmarkInterval: cfg.BookmarkInterval},
		typeConverter: typeConverter,
		compare:       &comparer{atomic: docs.AtomicList},
		kinds:         cfg.Kinds,
		state:         make(map[*resources.Kind]*kindState, len(cfg.Kinds)),
		byGVR:         map[schema.GroupVersionResource]resources.Resource{},
	}
	var caches []*watchcache.Cache
	for _, k := range cfg.Kinds {
		if err := k.Check(); err != nil {
			return nil, err
		}
		st := &kindState{cache: watchcache.New(watchcache.Config{
			Prefix:      r.kindPrefix(k),
			Namespaced:  k.Namespaced,
			Decode:      r.decoder(k),
			Fields:      k.Fields,
			KeepDecoded: k.ReadDecoded,
			Window:      cfg.WatchWindow,
		})}
		if st.fieldManagers, err = newFieldManagers(typeConverter, codecs.Scheme(), k); err != nil {
			return nil, err
		}
		cache := st.cache
		st.owners.size = func() int {
			if s := cache.Current(); s != nil {
				return s.Len()
			}
			return 0
		}
		st.owners.live = func(key string, rev int64) bool {
			s := cache.Current()
			if s == nil {
				return false
			}
			o, ok := s.Get(key)
			// The cache may lag the store: a newer revision is kept.
			return ok && o.Rev <= rev || !ok && s.Rev < rev
		}
		r.state[k] = st
		caches = append(caches, st.cache)
		for _, res := range k.Resources() {
			gvr := res.GroupVersionResource()
			if _, dup := r.byGVR[gvr]; dup {
				return nil, fmt.Errorf("registry: %s is served twice", gvr)
			}
			r.byGVR[gvr] = res
		}
	}
	r.feeder = watchcache.NewFeeder(cfg.Store, cfg.Prefix+"/", cfg.Logger, caches...)
	return r, nil
}

// Run feeds the watch caches until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				for _, st := range r.state {
					st.owners.prune()
				}
			}
		}
	})
	return r.feeder.Run(ctx)
}

// Ready is closed once every cache is filled.
func (r *Registry) Ready() <-chan struct{} { return r.feeder.Ready() }

// Kinds lists the served kinds.
func (r *Registry) Kinds() []*resources.Kind { return r.kinds }

// Resource returns the served resource a group, version and plural name;
// false when none is served.
func (r *Registry) Resource(gvr schema.GroupVersionResource) (resources.Resource, bool) {
	res, ok := r.byGVR[gvr]
	return res, ok
}

// ResourceFor returns the storage version of the served kind gk.
func (r *Registry) ResourceFor(gk schema.GroupKind) (resources.Resource, bool) {
	k := resources.Find(r.kinds, gk)
	if k == nil {
		return resources.Resource{}, false
	}
	return k.Storage(), true
}

// kindPrefix is the storage prefix of every object of k, ending in "/".
func (r *Registry) kindPrefix(k *resources.Kind) string {
	return r.prefix + "/" + k.KeyPath + "/"
}

// key is the storage key of one object, laid out as kube-apiserver does.
func (r *Registry) key(k *resources.Kind, namespace, name string) string {
	if k.Namespaced {
		return r.kindPrefix(k) + namespace + "/" + name
	}
	return r.kindPrefix(k) + name
}

func (r *Registry) decoder(k *resources.Kind) watchcache.Decoder {
	return func(kv storage.KeyValue) (resources.Object, error) {
		obj := k.Versions[0].New()
		if err := r.codecs.DecodeStorage(kv.Value, kv.ModRevision, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
}

func (r *Registry) cache(k *resources.Kind) *watchcache.Cache {
	st, ok := r.state[k]
	if !ok {
		panic(fmt.Sprintf("registry: kind %s is not served", k.Names.Kind))
	}
	return st.cache
}

// decode decodes a stored value of k.
func (r *Registry) decode(k *resources.Kind, kv storage.KeyValue) (resources.Object, error) {
	return r.decoder(k)(kv)
}

// jsonInfo is the JSON serializer, for decoding patched objects.
func (r *Registry) jsonInfo() runtime.SerializerInfo {
	info, _ := r.codecs.InputSerializer(codec.JSON)
	return info
}

// Codecs returns the codecs objects are encoded with.
func (r *Registry) Codecs() *codec.Codecs { return r.codecs }

// OpenAPI returns the OpenAPI documents of the served kinds.
func (r *Registry) OpenAPI() *openapi.Service { return r.openapi }

// Count returns how many objects of k the watch cache holds now, or -1
// before its first list (kube-apiserver's apiserver_storage_objects reports
// a failed count as -1).
func (r *Registry) Count(k *resources.Kind) int {
	s := r.cache(k).Current()
	if s == nil {
		return -1
	}
	return s.Len()
}
