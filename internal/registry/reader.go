package registry

import (
	"context"

	"github.com/leasehold/leasehold/internal/resources"
)

// reader is the registry as admission steps read it.
type reader struct{ r *Registry }

// Get answers from the cache when it holds the object; a miss is checked
// with a consistent read, so that an object created just before is found.
func (rd reader) Get(ctx context.Context, res resources.Resource, namespace, name string) (resources.Object, error) {
	if obj, ok := rd.r.cachedObject(res.Kind, rd.r.key(res.Kind, namespace, name)); ok {
		return obj, nil
	}
	c, err := rd.r.Get(ctx, res, namespace, name, "")
	if err != nil {
		return nil, err
	}
	return c.Object(), nil
}
