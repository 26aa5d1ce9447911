package watchcache

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// thing is the object these tests cache: its stored value is its labels,
// "k=v,k2=v2".
type thing struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (t *thing) DeepCopyObject() runtime.Object {
	c := &thing{TypeMeta: t.TypeMeta}
	t.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

const prefix = "/registry/things/"

func decodeThing(kv storage.KeyValue) (resources.Object, error) {
	set, err := labels.ConvertSelectorToLabelsMap(string(kv.Value))
	if err != nil {
		return nil, err
	}
	obj := &thing{}
	if len(set) > 0 {
		obj.Labels = set
	}
	obj.ResourceVersion = strconv.FormatInt(kv.ModRevision, 10)
	return obj, nil
}

// history drives a cache as its feeder would: every change a revision
// of its own, one publish per change.
type history struct {
	t   *testing.T
	c   *Cache
	rev int64
}

func newHistory(t *testing.T, window int) *history {
	t.Helper()
	c := New(Config{Prefix: prefix, Namespaced: true, Decode: decodeThing, Window: window})
	h := &history{t: t, c: c, rev: 10}
	if err := c.reset(nil, h.rev); err != nil {
		t.Fatal(err)
	}
	return h
}

// put writes ns/name with labels ("k=v") and publishes it.
func (h *history) put(name, lbls string) int64 {
	h.t.Helper()
	h.rev++
	ev, err := h.c.apply(storage.Event{Type: storage.EventPut, Revision: h.rev,
		KV: storage.KeyValue{Key: prefix + "ns/" + name, Value: []byte(lbls), ModRevision: h.rev}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.publish(h.rev, []Event{ev})
	return h.rev
}

func (h *history) del(name string) int64 {
	h.t.Helper()
	h.rev++
	ev, err := h.c.apply(storage.Event{Type: storage.EventDelete, Revision: h.rev,
		KV: storage.KeyValue{Key: prefix + "ns/" + name, ModRevision: h.rev}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.publish(h.rev, []Event{ev})
	return h.rev
}

// other spends a revision on another resource: the cache learns it only
// as a newer revision.
func (h *history) other() int64 {
	h.rev++
	h.c.publish(h.rev, nil)
	return h.rev
}

// content is a state's objects as name -> resourceVersion.
func content(s *State) map[string]int64 {
	out := map[string]int64{}
	for _, o := range s.List(Selector{}, "", 0).Objects {
		out[o.Name] = o.Rev
	}
	return out
}

func everything() Selector { return Selector{Label: labels.Everything(), Field: fields.Everything()} }

// TestRingEviction: the window keeps the last events; a cursor or a state
// older than them is expired, and Oldest says where history begins.
func TestRingEviction(t *testing.T) {
	h := newHistory(t, 3)
	start := h.rev
	var revs []int64
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		revs = append(revs, h.put(n, ""))
	}
	// Events after revs[1] (c, d, e) are kept; a, b evicted.
	if got := h.c.Oldest(); got != revs[1] {
		t.Errorf("Oldest() = %d, want %d", got, revs[1])
	}
	for _, rev := range []int64{start, revs[0]} {
		if _, err := h.c.CursorAfter(rev); !errors.Is(err, ErrExpired) {
			t.Errorf("CursorAfter(%d) = %v, want ErrExpired", rev, err)
		}
		if _, err := h.c.StateAt(rev); !errors.Is(err, ErrExpired) {
			t.Errorf("StateAt(%d) = %v, want ErrExpired", rev, err)
		}
	}
	cur, err := h.c.CursorAfter(revs[1])
	if err != nil {
		t.Fatal(err)
	}
	events, rev, _, err := cur.Read(make([]Event, 0, 8))
	if err != nil || rev != revs[4] {
		t.Fatalf("Read = %v at %d, %v", len(events), rev, err)
	}
	var names []string
	for _, ev := range events {
		names = append(names, ev.Object.Name)
	}
	if diff := cmp.Diff([]string{"c", "d", "e"}, names); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
}

// TestWatcherFallsBehind: a cursor whose next event leaves the window
// fails with ErrFellBehind instead of skipping it.
func TestWatcherFallsBehind(t *testing.T) {
	h := newHistory(t, 4)
	cur, err := h.c.CursorAfter(h.rev)
	if err != nil {
		t.Fatal(err)
	}
	h.put("a", "")
	h.put("b", "")
	buf := make([]Event, 0, 1)
	if events, _, _, err := cur.Read(buf); err != nil || len(events) != 1 || events[0].Object.Name != "a" {
		t.Fatalf("first read: %v %v", events, err)
	}
	// b is unread; four more push it out of a window of four.
	for _, n := range []string{"c", "d", "e", "f"} {
		h.put(n, "")
	}
	if _, _, _, err := cur.Read(buf); !errors.Is(err, ErrFellBehind) {
		t.Fatalf("read behind the window: %v, want ErrFellBehind", err)
	}
}

// TestStateAtPastRevisions: a state rebuilt from the window equals the
// state published then, objects and resourceVersions alike; a revision
// spent elsewhere reads as the state before it.
func TestStateAtPastRevisions(t *testing.T) {
	h := newHistory(t, 100)
	snapshots := map[int64]map[string]int64{}
	steps := []func() int64{
		func() int64 { return h.put("a", "x=1") },
		func() int64 { return h.put("b", "") },
		func() int64 { return h.other() },
		func() int64 { return h.put("a", "x=2") },
		func() int64 { return h.del("b") },
		func() int64 { return h.put("c", "") },
		func() int64 { return h.del("a") },
		func() int64 { return h.put("b", "again=yes") },
	}
	for _, step := range steps {
		rev := step()
		snapshots[rev] = content(h.c.Current())
	}
	for rev, want := range snapshots {
		s, err := h.c.StateAt(rev)
		if err != nil {
			t.Fatalf("StateAt(%d): %v", rev, err)
		}
		if s.Rev != rev {
			t.Errorf("StateAt(%d).Rev = %d", rev, s.Rev)
		}
		if diff := cmp.Diff(want, content(s)); diff != "" {
			t.Errorf("StateAt(%d) (-want +got):\n%s", rev, diff)
		}
	}
	if _, err := h.c.StateAt(h.rev + 1); err == nil {
		t.Error("StateAt a future revision succeeded")
	}
}

// TestSelectorTransitions: a watcher with a selector sees an object that
// starts matching as ADDED, one that stops as DELETED (its last matching
// content at the new revision), and nothing of objects it never matched.
func TestSelectorTransitions(t *testing.T) {
	h := newHistory(t, 100)
	cur, err := h.c.CursorAfter(h.rev)
	if err != nil {
		t.Fatal(err)
	}
	sel := everything()
	sel.Label = labels.SelectorFromSet(labels.Set{"pick": "yes"})
	h.put("a", "pick=no")      // never seen
	h.put("a", "pick=yes")     // enters: ADDED
	h.put("a", "pick=yes,v=2") // stays: MODIFIED
	leave := h.put("a", "pick=no")
	h.put("b", "pick=yes")
	h.del("b") // DELETED while matching
	h.put("c", "")
	h.del("c") // never seen

	events, _, _, err := cur.Read(make([]Event, 0, 16))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Type   watch.EventType
		Name   string
		Labels string
		Rev    int64
	}
	var got []seen
	for i := range events {
		if ev, ok := Filter(&events[i], sel); ok {
			got = append(got, seen{ev.Type, ev.Object.Name, labels.Set(ev.Object.Labels).String(), ev.Object.Rev})
		}
	}
	want := []seen{
		{watch.Added, "a", "pick=yes", leave - 2},
		{watch.Modified, "a", "pick=yes,v=2", leave - 1},
		{watch.Deleted, "a", "pick=yes,v=2", leave},
		{watch.Added, "b", "pick=yes", leave + 1},
		{watch.Deleted, "b", "pick=yes", leave + 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The object of a DELETED event carries the delete revision.
	for _, ev := range events {
		if ev.Type == watch.Deleted && ev.Object.Decoded().GetResourceVersion() != strconv.FormatInt(ev.Rev, 10) {
			t.Errorf("DELETED %s carries resourceVersion %s, want %d", ev.Object.Name, ev.Object.Decoded().GetResourceVersion(), ev.Rev)
		}
	}
}

// TestWaitFor: a read waiting for a revision returns once the cache
// publishes it, and gives up when its context ends first.
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHistory(t, 10)
		target := h.rev + 2
		got := make(chan int64, 1)
		go func() {
			s, err := h.c.WaitFor(t.Context(), target)
			if err != nil {
				t.Error(err)
			}
			got <- s.Rev
		}()
		synctest.Wait()
		h.put("a", "")
		synctest.Wait()
		select {
		case rev := <-got:
			t.Fatalf("returned at %d, before %d", rev, target)
		default:
		}
		h.other()
		if rev := <-got; rev != target {
			t.Errorf("WaitFor(%d) returned %d", target, rev)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := h.c.WaitFor(ctx, h.rev+1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitFor a revision that never comes: %v", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("waited %v, want the context's 3s", waited)
		}
	})
}

// TestCursorWakes: a cursor with nothing to read hands out a channel that
// is closed when the cache publishes.
func TestCursorWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHistory(t, 10)
		cur, err := h.c.CursorAfter(h.rev)
		if err != nil {
			t.Fatal(err)
		}
		events, rev, wake, err := cur.Read(make([]Event, 0, 4))
		if err != nil || len(events) != 0 || rev != h.rev {
			t.Fatalf("empty read: %v at %d, %v", events, rev, err)
		}
		woke := make(chan struct{})
		go func() {
			<-wake
			close(woke)
		}()
		synctest.Wait()
		select {
		case <-woke:
			t.Fatal("woke before anything happened")
		default:
		}
		h.put("a", "")
		<-woke
		if events, _, _, _ := cur.Read(make([]Event, 0, 4)); len(events) != 1 {
			t.Errorf("after the wake: %d events", len(events))
		}
	})
}

// TestDecodedWhileInWindow: an object stays decoded while its event is in
// the window, for watchers and controllers; after that it is decoded on
// each read, to the same object, and selectors match it without decoding.
func TestDecodedWhileInWindow(t *testing.T) {
	decodes := 0
	c := New(Config{Prefix: prefix, Namespaced: true, Window: 2,
		Decode: func(kv storage.KeyValue) (resources.Object, error) {
			decodes++
			return decodeThing(kv)
		},
		Fields: resources.Fields{Labels: []string{"metadata.name", "spec.f"},
			Value: func(obj resources.Object, label string) string { return obj.GetLabels()["f"] }},
	})
	h := &history{t: t, c: c, rev: 10}
	if err := c.reset(nil, h.rev); err != nil {
		t.Fatal(err)
	}
	h.put("a", "f=1,x=y")
	get := func(name string) *Object {
		o, ok := c.Current().Get(prefix + "ns/" + name)
		if !ok {
			t.Fatalf("%s not cached", name)
		}
		return o
	}
	a := get("a")
	if a.Decoded() != a.Decoded() {
		t.Error("an object of an event in the window is decoded again")
	}
	h.put("b", "f=2")
	h.put("c", "f=3") // a's event leaves the window
	first, second := a.Decoded(), a.Decoded()
	if first == second {
		t.Error("an object whose event left the window is still kept decoded")
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("two decodings differ:\n%s", diff)
	}
	if rv := first.GetResourceVersion(); rv != strconv.FormatInt(a.Rev, 10) || first.GetLabels()["x"] != "y" {
		t.Errorf("decoded again: resourceVersion %s, labels %v; want %d, x=y", rv, first.GetLabels(), a.Rev)
	}

	before := decodes
	sel := Selector{Field: fields.OneTermEqualSelector("spec.f", "1"), Label: labels.SelectorFromSet(labels.Set{"x": "y"})}
	var names []string
	for _, o := range c.Current().List(sel, "", 0).Objects {
		names = append(names, o.Name)
	}
	if !cmp.Equal(names, []string{"a"}) {
		t.Errorf("spec.f=1,x=y selects %v, want [a]", names)
	}
	sel = Selector{Field: fields.OneTermNotEqualSelector("metadata.name", "b")}
	if n := len(c.Current().List(sel, "", 0).Objects); n != 2 {
		t.Errorf("metadata.name!=b selects %d objects, want 2", n)
	}
	if decodes != before {
		t.Errorf("selectors decoded %d objects", decodes-before)
	}

	// A delete of an object no longer kept decoded: its DELETED event
	// carries it at the delete revision.
	cur, err := c.CursorAfter(h.rev)
	if err != nil {
		t.Fatal(err)
	}
	rev := h.del("a")
	events, _, _, err := cur.Read(make([]Event, 0, 4))
	if err != nil || len(events) != 1 {
		t.Fatalf("read %d events, %v", len(events), err)
	}
	if got := events[0].Object.Decoded().GetResourceVersion(); got != strconv.FormatInt(rev, 10) {
		t.Errorf("DELETED carries resourceVersion %s, want %d", got, rev)
	}
}

// TestListRange: a namespace's list holds its objects and no other's,
// whatever sorts beside it (namespaces that extend its name, keys past
// it by one byte), from any key on; Count counts the same range.
func TestListRange(t *testing.T) {
	h := newHistory(t, 10)
	keys := []string{"a/1", "a/2", "a-b/1", "ab/1", "a0/1", "b/1", "a\xff/1"}
	for _, k := range keys {
		h.rev++
		ev, err := h.c.apply(storage.Event{Type: storage.EventPut, Revision: h.rev,
			KV: storage.KeyValue{Key: prefix + k, Value: nil, ModRevision: h.rev}})
		if err != nil {
			t.Fatal(err)
		}
		h.c.publish(h.rev, []Event{ev})
	}
	s := h.c.Current()
	names := func(p Page) (out []string) {
		for _, o := range p.Objects {
			out = append(out, o.Namespace+"/"+o.Name)
		}
		return out
	}
	for _, c := range []struct {
		sel   Selector
		from  string
		limit int
		want  []string
		next  string
		count int
	}{
		{sel: Selector{Namespace: "a"}, want: []string{"a/1", "a/2"}, count: 2},
		{sel: Selector{Namespace: "a"}, limit: 1, want: []string{"a/1"}, next: prefix + "a/2", count: 2},
		{sel: Selector{Namespace: "a"}, from: prefix + "a/1\x00", want: []string{"a/2"}, count: 1},
		{sel: Selector{Namespace: "a\xff"}, want: []string{"a\xff/1"}, count: 1},
		{sel: Selector{Namespace: "a0"}, want: []string{"a0/1"}, count: 1},
		{sel: Selector{Namespace: "c"}, count: 0},
		// A from past the range (a forged continue token) reads nothing
		// of the namespaces after it.
		{sel: Selector{Namespace: "a"}, from: prefix + "b/1", count: 0},
		{sel: Selector{Namespace: "a"}, from: prefix + "a0/1", count: 0},
		{sel: Selector{Namespace: "a", Name: "2"}, want: []string{"a/2"}, count: 1},
		{sel: Selector{Namespace: "a", Name: "2"}, from: prefix + "a/2\x00", count: 0},
		{sel: Selector{}, limit: 3, want: []string{"a-b/1", "a/1", "a/2"}, next: prefix + "a0/1", count: len(keys)},
	} {
		p := s.List(c.sel, c.from, c.limit)
		if diff := cmp.Diff(c.want, names(p)); diff != "" || p.Next != c.next {
			t.Errorf("List(%+v, %q, %d): next %q (want %q), objects (-want +got):\n%s", c.sel, c.from, c.limit, p.Next, c.next, diff)
		}
		if n := s.Count(c.sel, c.from); n != c.count {
			t.Errorf("Count(%+v, %q) = %d, want %d", c.sel, c.from, n, c.count)
		}
	}
}
