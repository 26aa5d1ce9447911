package registry

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// WatchStart is where a watch begins: optional initial ADDED events for the
// objects of a state, then every change the cursor reads.
type WatchStart struct {
	Selector watchcache.Selector
	// Initial, when set, is sent first as ADDED events.
	Initial *watchcache.State
	// InitialEventsEnd asks for the bookmark annotated
	// k8s.io/initial-events-end after the initial events (streaming lists).
	InitialEventsEnd bool
	Cursor           *watchcache.Cursor
}

// Watch starts a watch with kube-apiserver's resourceVersion rules: from
// revision N it replays every later change; without one (or "0") it first
// sends the current objects; sendInitialEvents=true streams a list, then a
// bookmark. name is set for single-object watches. A revision older than
// the event window fails with a 410 Expired error, which the caller sends
// as an ERROR event.
func (r *Registry) Watch(ctx context.Context, res *resources.Resource, namespace, name string, opts *metainternalversion.ListOptions) (*WatchStart, error) {
	if name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); !ok || selected != name {
				return nil, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
		}
	}
	sel, err := r.selector(res, namespace, opts)
	if err != nil {
		return nil, err
	}
	rv, err := parseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	c := r.cache(res)
	ws := &WatchStart{Selector: sel}
	fromState := func() error {
		s, err := r.stateNotOlderThan(ctx, c, opts.ResourceVersion, rv)
		if err != nil {
			return err
		}
		ws.Initial = s
		ws.Cursor, err = c.CursorAfter(s.Rev)
		if err != nil {
			// The state is newer than the window's start; this only happens
			// if the cache was rebuilt meanwhile.
			return apierrors.NewServiceUnavailable("the watch cache was rebuilt; retry")
		}
		return nil
	}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		if err := fromState(); err != nil {
			return nil, err
		}
		ws.InitialEventsEnd = true
		return ws, nil
	case opts.SendInitialEvents != nil && rv == 0:
		// sendInitialEvents=false without a revision: changes from now.
		if err := fromState(); err != nil {
			return nil, err
		}
		ws.Initial = nil
		return ws, nil
	case opts.SendInitialEvents == nil && rv == 0:
		// Legacy watch without a revision: the current objects, then
		// changes (no bookmark marks the end).
		if err := fromState(); err != nil {
			return nil, err
		}
		return ws, nil
	}
	if cur := c.Current(); cur == nil || cur.Rev < rv {
		if _, err := r.waitFor(ctx, c, rv); err != nil {
			return nil, err
		}
	}
	ws.Cursor, err = c.CursorAfter(rv)
	if errors.Is(err, watchcache.ErrExpired) {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, c.Oldest()))
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return ws, nil
}
