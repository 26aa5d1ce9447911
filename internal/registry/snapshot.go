package registry

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// Snapshot is the cached objects of one kind at one revision, read in
// place: for readers that look at many objects on every request (the
// RBAC authorizer reads every binding), with no copy and no encoding
// (the kinds they read are resources.Kind.ReadDecoded). Its objects are
// of the storage version and shared: never modify them.
type Snapshot struct {
	k *resources.Kind
	s *watchcache.State
	r *Registry
}

// Snapshot returns the kind's latest cached state, as a read with
// resourceVersion "0" sees it (it may trail the store by the cache's lag);
// ok is false before the cache is first filled.
func (r *Registry) Snapshot(res resources.Resource) (Snapshot, bool) {
	s := r.cache(res.Kind).Current()
	return Snapshot{k: res.Kind, s: s, r: r}, s != nil
}

// ConsistentSnapshot returns a state of the kind that holds every write
// the store acknowledged before the call, as a consistent read does.
func (r *Registry) ConsistentSnapshot(ctx context.Context, res resources.Resource) (Snapshot, error) {
	s, err := r.stateNotOlderThan(ctx, res, "", 0)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{k: res.Kind, s: s, r: r}, nil
}

// Rev is the store revision the snapshot reflects.
func (s Snapshot) Rev() int64 { return s.s.Rev }

// Get returns one object; namespace is empty for cluster-scoped kinds.
func (s Snapshot) Get(namespace, name string) (resources.Object, bool) {
	o, ok := s.s.Get(s.r.key(s.k, namespace, name))
	if !ok {
		return nil, false
	}
	return o.Decoded(), true
}

// Each calls fn with the objects of namespace in name order ("" for every
// namespace, and for cluster-scoped kinds) until fn returns false.
func (s Snapshot) Each(namespace string, fn func(resources.Object) bool) {
	if namespace != "" && !s.k.Namespaced {
		panic(fmt.Sprintf("registry: kind %s is not namespaced", s.k.Names.Kind))
	}
	s.s.Each(namespace, func(o *watchcache.Object) bool { return fn(o.Decoded()) })
}
