package registry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// Config configures a Registry.
type Config struct {
	Store  storage.Interface
	Codecs *codec.Codecs
	// Prefix is the storage key prefix, "/registry" by default.
	Prefix    string
	Resources []*resources.Resource
	// Namespaces is the namespace resource; namespaced objects may only be
	// created in existing, active namespaces.
	Namespaces *resources.Resource
	// WatchWindow is the number of events kept per resource for watches
	// that resume from a past revision.
	WatchWindow int
	Logger      *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// TypeConverter describes the served types for managedFields and
	// server-side apply (built from the OpenAPI definitions); without it
	// managedFields are not tracked and apply is refused.
	TypeConverter managedfields.TypeConverter
}

// Registry serves the verbs of every configured resource.
type Registry struct {
	store      storage.Interface
	codecs     *codec.Codecs
	prefix     string
	caches     map[*resources.Resource]*watchcache.Cache
	feeder     *watchcache.Feeder
	namespaces *resources.Resource
	log        *slog.Logger
	now        func() time.Time
	// fieldManagers track managedFields per resource and subresource.
	fieldManagers map[fieldManagerKey]*managedfields.FieldManager
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
	r := &Registry{
		store:      cfg.Store,
		codecs:     cfg.Codecs,
		prefix:     cfg.Prefix,
		caches:     make(map[*resources.Resource]*watchcache.Cache, len(cfg.Resources)),
		namespaces: cfg.Namespaces,
		log:        cfg.Logger,
		now:        cfg.Now,
	}
	var caches []*watchcache.Cache
	for _, res := range cfg.Resources {
		c := watchcache.New(watchcache.Config{
			Resource: res,
			Prefix:   r.resourcePrefix(res),
			Decode:   r.decoder(res),
			Window:   cfg.WatchWindow,
		})
		r.caches[res] = c
		caches = append(caches, c)
	}
	r.feeder = watchcache.NewFeeder(cfg.Store, cfg.Prefix+"/", cfg.Logger, caches...)
	if cfg.TypeConverter != nil {
		fms, err := newFieldManagers(cfg.TypeConverter, cfg.Codecs.Scheme(), cfg.Resources)
		if err != nil {
			return nil, err
		}
		r.fieldManagers = fms
	}
	return r, nil
}

// Run feeds the watch caches until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	return r.feeder.Run(ctx)
}

// Ready is closed once every cache is filled.
func (r *Registry) Ready() <-chan struct{} { return r.feeder.Ready() }

// resourcePrefix is the storage prefix of all objects of res, ending in "/".
func (r *Registry) resourcePrefix(res *resources.Resource) string {
	return r.prefix + "/" + res.KeyPath + "/"
}

// key is the storage key of one object, laid out as kube-apiserver does.
func (r *Registry) key(res *resources.Resource, namespace, name string) string {
	if res.Namespaced {
		return r.resourcePrefix(res) + namespace + "/" + name
	}
	return r.resourcePrefix(res) + name
}

func (r *Registry) decoder(res *resources.Resource) watchcache.Decoder {
	return func(value []byte, rev int64) (resources.Object, error) {
		obj := res.New()
		if err := r.codecs.DecodeStorage(value, rev, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
}

func (r *Registry) cache(res *resources.Resource) *watchcache.Cache {
	c, ok := r.caches[res]
	if !ok {
		panic(fmt.Sprintf("registry: resource %s is not registered", res.Plural))
	}
	return c
}

// decode decodes a stored value of res.
func (r *Registry) decode(res *resources.Resource, kv storage.KeyValue) (resources.Object, error) {
	return r.decoder(res)(kv.Value, kv.ModRevision)
}

// jsonInfo is the JSON serializer, for decoding patched objects.
func (r *Registry) jsonInfo() runtime.SerializerInfo {
	info, _ := r.codecs.InputSerializer(codec.JSON)
	return info
}
