package controllers_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/testkit/testregistry"
)

// view is what a controller keeps with a Follower: the objects by name,
// with a list's sweep.
type view struct {
	mu       sync.Mutex
	objs     map[string]string // name → resourceVersion
	seen     map[string]bool   // during a list
	lists    int
	listsEnd int
	// block, when set, holds Apply until closed: a reader falling behind.
	block chan struct{}
}

func (v *view) listing() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lists++
	v.seen = map[string]bool{}
}

func (v *view) apply(events []registry.Event) {
	v.mu.Lock()
	block := v.block
	v.mu.Unlock()
	if block != nil {
		<-block
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				for n := range v.objs {
					if !v.seen[n] {
						delete(v.objs, n)
					}
				}
				v.seen = nil
				v.listsEnd++
			}
			continue
		}
		name := ev.Object.Object().GetName()
		if v.seen != nil {
			v.seen[name] = true
		}
		if ev.Type == watch.Deleted {
			delete(v.objs, name)
		} else {
			v.objs[name] = ev.Object.Object().GetResourceVersion()
		}
	}
}

// waitFor waits until the view holds exactly want (name → the version,
// or "" for any), with no list in progress.
func (v *view) waitFor(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.mu.Lock()
		ok := len(v.objs) == len(want) && v.seen == nil
		for n, rv := range want {
			if got, has := v.objs[n]; !has || rv != "" && got != rv {
				ok = false
			}
		}
		got := fmt.Sprint(v.objs)
		v.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("view holds %s, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollower: a Follower lists, follows changes, resumes a watch that
// timed out without listing again, and lists again (with the deletions
// made meanwhile) after falling behind a window that no longer holds its
// revision.
func TestFollower(t *testing.T) {
	reg, res, create := leases(t, testregistry.Options{WatchWindow: 4, MinWatchTimeout: 300 * time.Millisecond})
	ctx := t.Context()
	del := func(name string) {
		if _, err := reg.Delete(ctx, res, "default", name, &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := create("a"), create("b")

	v := &view{objs: map[string]string{}}
	f := &controllers.Follower{Registry: reg, Resource: res, Log: slog.New(slog.DiscardHandler), Listing: v.listing, Apply: v.apply}
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	v.waitFor(t, map[string]string{"a": a, "b": b})

	c := create("c")
	del("a")
	v.waitFor(t, map[string]string{"b": b, "c": c})

	// Watches end every ~0.3–0.6 s: each resumes where the last ended.
	time.Sleep(1500 * time.Millisecond)
	d := create("d")
	v.waitFor(t, map[string]string{"b": b, "c": c, "d": d})
	v.mu.Lock()
	lists := v.lists
	v.mu.Unlock()
	if lists != 1 {
		t.Fatalf("%d lists after watches timed out, want 1", lists)
	}

	// Held while more than the window's 4 events happen: the watch falls
	// behind, its revision is gone, and a new list brings the state,
	// without b.
	block := make(chan struct{})
	v.mu.Lock()
	v.block = block
	v.mu.Unlock()
	e := create("e") // the event the view is held on
	del("b")
	var names []string
	for i := range 6 {
		names = append(names, string(rune('f'+i)))
	}
	want := map[string]string{"c": c, "d": d, "e": e}
	for _, n := range names {
		want[n] = create(n)
	}
	v.mu.Lock()
	v.block = nil
	v.mu.Unlock()
	close(block)
	v.waitFor(t, want)
	v.mu.Lock()
	lists, listsEnd := v.lists, v.listsEnd
	v.mu.Unlock()
	if lists != 2 || listsEnd != 2 {
		t.Fatalf("%d lists begun and %d ended, want 2 and 2", lists, listsEnd)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	default:
	}
}

// TestPacedFollowerKeepsUp: a paced follower waits between reads only
// when nothing more is waiting: hundreds of events that came while it was
// busy are read at once, not a batch a pace.
func TestPacedFollowerKeepsUp(t *testing.T) {
	reg, res, create := leases(t, testregistry.Options{WatchWindow: 2000})
	ctx := t.Context()
	v := &view{objs: map[string]string{}}
	f := &controllers.Follower{Registry: reg, Resource: res, Log: slog.New(slog.DiscardHandler), Listing: v.listing, Apply: v.apply, Pace: 2 * time.Second}
	go func() { _ = f.Run(ctx) }()
	v.waitFor(t, map[string]string{})

	want := map[string]string{}
	for i := range 1000 {
		n := fmt.Sprintf("l%04d", i)
		want[n] = create(n)
	}
	// Read a batch a pace (8, 16, ... 256), the thousand would take some
	// 18 s; the view must hold them in waitFor's 10 s.
	v.waitFor(t, want)
}

// leases starts a registry with opts and returns it, its Lease resource,
// and a function that creates a Lease in default and returns its
// resourceVersion.
func leases(t *testing.T, opts testregistry.Options) (*registry.Registry, resources.Resource, func(name string) string) {
	t.Helper()
	reg := testregistry.Start(t, opts)
	res, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		t.Fatal("leases are not served")
	}
	create := func(name string) string {
		out, err := reg.Create(t.Context(), res, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, registry.WriteOptions{Manager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return out.Object.GetResourceVersion()
	}
	return reg, res, create
}
