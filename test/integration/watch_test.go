package integration

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// next returns the next event of w, failing after 10 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

func wantEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) *coordinationv1.Lease {
	t.Helper()
	ev := next(t, w)
	l, ok := ev.Object.(*coordinationv1.Lease)
	if ev.Type != typ || !ok || (name != "" && l.Name != name) {
		t.Fatalf("got %s %T %+v, want %s %s", ev.Type, ev.Object, ev.Object, typ, name)
	}
	return l
}

func TestWatchSemantics(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for enc, c := range s.Clients(t) {
		t.Run(enc, func(t *testing.T) {
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			start := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))

			w := must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion}))
			defer w.Stop()
			a := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w-" + enc, Labels: map[string]string{"pick": "yes"}}}, metav1.CreateOptions{}))
			if got := wantEvent(t, w, watch.Added, a.Name); got.ResourceVersion != a.ResourceVersion {
				t.Errorf("ADDED object %+v", got)
			}
			a.Spec.HolderIdentity = ptr("h")
			b := must[*coordinationv1.Lease](t)(leases.Update(ctx, a, metav1.UpdateOptions{}))
			wantEvent(t, w, watch.Modified, a.Name)
			must[*coordinationv1.Lease](t)(leases.Update(ctx, b.DeepCopy(), metav1.UpdateOptions{})) // no-op: no event
			if err := leases.Delete(ctx, a.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			del := wantEvent(t, w, watch.Deleted, a.Name)
			if rv, _ := strconv.Atoi(del.ResourceVersion); rv <= mustAtoi(t, b.ResourceVersion) || *del.Spec.HolderIdentity != "h" {
				t.Errorf("DELETED carries %s %+v, want the last state at the delete revision", del.ResourceVersion, del.Spec)
			}

			// Replaying from the first list revision gives the same events,
			// in order.
			replay := must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion}))
			defer replay.Stop()
			for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
				wantEvent(t, replay, typ, a.Name)
			}

			// Selector semantics: leaving the selector is DELETED, entering
			// it ADDED.
			sel := must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion, LabelSelector: "pick=yes"}))
			defer sel.Stop()
			for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
				wantEvent(t, sel, typ, a.Name)
			}
			c := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "s-" + enc}}, metav1.CreateOptions{}))
			c.Labels = map[string]string{"pick": "yes"}
			c = must[*coordinationv1.Lease](t)(leases.Update(ctx, c, metav1.UpdateOptions{}))
			wantEvent(t, sel, watch.Added, c.Name)
			c.Labels = nil
			c = must[*coordinationv1.Lease](t)(leases.Update(ctx, c, metav1.UpdateOptions{}))
			gone := wantEvent(t, sel, watch.Deleted, c.Name)
			if gone.ResourceVersion != c.ResourceVersion || gone.Labels["pick"] != "yes" {
				t.Errorf("leaving the selector: %+v, want old content at the new revision %s", gone.ObjectMeta, c.ResourceVersion)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWatchStartingPoints(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *server.Config) { c.WatchWindow = 8 })
	ctx := t.Context()
	leases := s.Client(t).CoordinationV1().Leases("default")
	createLeases(t, s, "default", 3, nil)

	// Without a revision: one ADDED per existing object, then changes.
	w := must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{}))
	for range 3 {
		wantEvent(t, w, watch.Added, "")
	}
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}))
	wantEvent(t, w, watch.Added, "x")
	w.Stop()

	// A streaming list: ADDED events, then the bookmark that ends them.
	w = must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{
		SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
	}))
	for range 4 {
		wantEvent(t, w, watch.Added, "")
	}
	bm := wantEvent(t, w, watch.Bookmark, "")
	if bm.Annotations[metav1.InitialEventsAnnotationKey] != "true" || bm.ResourceVersion == "" {
		t.Errorf("bookmark %+v", bm.ObjectMeta)
	}
	w.Stop()
	_, err := leases.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true)})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid)

	// Too old: HTTP 200, then an ERROR event with 410 Expired.
	first := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
	createLeases(t, s, "default", 0, nil)
	for i := range 12 {
		must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "old" + strconv.Itoa(i)}}, metav1.CreateOptions{}))
	}
	w = must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion}))
	ev := next(t, w)
	if ev.Type != watch.Error {
		t.Fatalf("got %s, want ERROR", ev.Type)
	}
	// kube-apiserver's words: "too old resource version: N (M)", M the
	// oldest revision still available minus one.
	err = apierrors.FromObject(ev.Object)
	if m := regexp.MustCompile(`^too old resource version: (\d+) \((\d+)\)$`).FindStringSubmatch(err.Error()); !apierrors.IsResourceExpired(err) || m == nil ||
		m[1] != first.ResourceVersion || mustAtoi(t, m[2]) <= mustAtoi(t, first.ResourceVersion) {
		t.Fatalf("ERROR event %v, want 410 Expired: too old resource version: %s (M > %[2]s)", err, first.ResourceVersion)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Error("watch went on after the 410")
	}

	// timeoutSeconds ends the stream cleanly. (From the latest revision: a
	// watch from "0" may start at a cache state just before the last
	// create and rightly deliver it.)
	last := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
	w = must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr[int64](1), ResourceVersion: last.ResourceVersion, SendInitialEvents: ptr(false), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}))
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected event %s", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch with timeoutSeconds=1 still open after 5s")
	}
}

func TestWatchSingleObjectPath(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	createLeases(t, s, "default", 2, nil)
	r := do(t, s, "GET", "/apis/coordination.k8s.io/v1/watch/namespaces/default/leases/l001?timeoutSeconds=1", nil, "")
	if r.code != 200 || string(r.body) == "" || indexOf(string(r.body), `"name":"l000"`) >= 0 || indexOf(string(r.body), `"name":"l001"`) < 0 {
		t.Errorf("single-object watch: %d %s", r.code, r.body)
	}
	r = do(t, s, "GET", "/apis/coordination.k8s.io/v1/watch/namespaces/default/leases/l001?fieldSelector=metadata.name%3Dl000", nil, "")
	if r.code != 400 || r.status(t)["message"] != "fieldSelector metadata.name doesn't match requested name" {
		t.Errorf("mismatched name: %d %s", r.code, r.body)
	}
	// An object's own path is a get whatever ?watch says, as
	// kube-apiserver routes it.
	r = do(t, s, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l001?watch=true", nil, "")
	if r.code != 200 || indexOf(string(r.body), `"kind":"Lease"`) < 0 {
		t.Errorf("named GET with watch=true: %d %s", r.code, r.body)
	}
}

// TestWatchBookmarks: reflectors and RetryWatcher ask for bookmarks and
// resume from them. A watch whose selector matches nothing still gets a
// BOOKMARK carrying a revision that covers the writes it filtered out,
// shortly before its timeout ends it, as kube-apiserver sends one; the
// bookmark is an empty Lease with only its resourceVersion.
func TestWatchBookmarks(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	for enc, c := range s.Clients(t) {
		leases := c.CoordinationV1().Leases("default")
		list := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
		w := must[watch.Interface](t)(leases.Watch(ctx, metav1.ListOptions{
			ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true, TimeoutSeconds: ptr[int64](3), LabelSelector: "bookmark=test"}))
		var last *coordinationv1.Lease
		for i := range 3 {
			last = must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: enc + "-bm-" + strconv.Itoa(i)}}, metav1.CreateOptions{}))
		}
		written := must[int64](t)(strconv.ParseInt(last.ResourceVersion, 10, 64))
		ev := next(t, w)
		if ev.Type != watch.Bookmark {
			t.Fatalf("%s: got %s, want BOOKMARK", enc, ev.Type)
		}
		bm, ok := ev.Object.(*coordinationv1.Lease)
		if !ok || bm.Name != "" || bm.Spec != (coordinationv1.LeaseSpec{}) {
			t.Fatalf("%s: bookmark object %#v", enc, ev.Object)
		}
		if rv := must[int64](t)(strconv.ParseInt(bm.ResourceVersion, 10, 64)); rv < written {
			t.Errorf("%s: bookmark at %d, before the filtered writes (up to %d)", enc, rv, written)
		}
		select {
		case ev, ok := <-w.ResultChan():
			if ok {
				t.Errorf("%s: %s after the bookmark, want the end of the watch", enc, ev.Type)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: watch still open after its timeout", enc)
		}
		w.Stop()
	}
}
