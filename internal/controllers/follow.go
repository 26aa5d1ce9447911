package controllers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// Follower keeps a controller's view of every object of one resource
// current, as a client-go informer does: a streaming list (a watch that
// begins with every object), then the changes. When a watch ends it
// resumes from the last revision seen, and when that revision has left
// the cache (410) it lists again.
type Follower struct {
	Registry *registry.Registry
	Resource resources.Resource
	Log      *slog.Logger
	// Listing, when set, is called as a list begins, before its events.
	Listing func()
	// Apply applies a batch of events in revision order. During a list
	// every object comes as Added, and a Bookmark with InitialEnd ends
	// it: an object not seen since Listing was deleted meanwhile. Then
	// come changes and bookmarks. The objects are the registry's, shared:
	// never modified.
	Apply func(events []registry.Event)
	// Pace, when positive, is the shortest time between two reads of
	// the watch once the list is done: events that arrive meanwhile come
	// in one batch (a full page is followed by the next at once). A follower that need not act at once (the garbage
	// collector, metrics) then wakes a few times a second however many
	// Leases renew, rather than once or more per renewal.
	Pace time.Duration
}

// Run follows the resource until ctx ends (nil) or the registry fails.
func (f *Follower) Run(ctx context.Context) error {
	var rev int64
	for {
		next, err := f.watch(ctx, rev)
		switch {
		case ctx.Err() != nil:
			return nil
		case apierrors.IsResourceExpired(err):
			f.Log.Info("watch too old; listing again", "resource", f.Resource.GroupResource().String(), "revision", rev)
			rev = 0
		case err != nil:
			return err
		default:
			rev = next
		}
	}
}

// watch runs one watch from rev (a streaming list when 0) and returns the
// revision it reached when it ended; 0 when it ended inside its list.
func (f *Follower) watch(ctx context.Context, rev int64) (int64, error) {
	opts := &metainternalversion.ListOptions{AllowWatchBookmarks: true}
	listing := rev == 0
	if listing {
		yes := true
		opts.SendInitialEvents = &yes
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		if f.Listing != nil {
			f.Listing()
		}
	} else {
		opts.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	w, err := f.Registry.Watch(ctx, f.Resource, "", "", opts)
	if err != nil {
		return rev, err
	}
	defer w.Stop()
	for {
		events, err := w.Next(ctx)
		// A watch that fell behind resumes as one that timed out: from
		// the last revision seen, which the cache may still have.
		if errors.Is(err, io.EOF) || errors.Is(err, registry.ErrFellBehind) {
			if listing {
				return 0, nil
			}
			return rev, nil
		}
		if err != nil {
			return rev, err
		}
		f.Apply(events)
		// A paced follower that waited with more events waiting would
		// read at most a batch a pace (5,120 renewals a second at 50 ms)
		// and fall behind a busier store.
		if f.Pace > 0 && !listing && !w.More() {
			t := time.NewTimer(f.Pace)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		for _, ev := range events {
			// Initial events carry their objects' revisions, older than
			// the list's: only the end of the list gives one to resume
			// from.
			if !listing {
				rev = ev.Rev
			}
			if ev.Type == watch.Bookmark && ev.InitialEnd {
				listing, rev = false, ev.Rev
			}
		}
	}
}
