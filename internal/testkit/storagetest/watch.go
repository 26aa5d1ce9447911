package storagetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/storage"
)

// history is a fixed sequence of writes under /registry/leases/ with writes
// to other prefixes in between, and the events a watcher of the leases
// prefix must see for it.
type history struct {
	start int64 // revision before the first write
	want  []storage.Event
}

func writeHistory(t *testing.T, st storage.Interface) history {
	t.Helper()
	h := history{start: mustRevision(t, st)}
	put := func(kv storage.KeyValue) {
		h.want = append(h.want, storage.Event{Type: storage.EventPut, KV: kv, Revision: kv.ModRevision})
	}
	a1 := mustPut(t, st, "/registry/leases/ns/a", "a1", 0)
	put(a1)
	mustPut(t, st, "/registry/services/endpoints/ns/a", "e1", 0)
	a2 := mustUpdate(t, st, a1, "a2")
	put(a2)
	b1 := mustPut(t, st, "/registry/leases/ns/b", "b1", 0)
	put(b1)
	mustPut(t, st, "/registry/namespaces/ns", "n1", 0)
	del := mustDelete(t, st, a1.Key, a2.ModRevision)
	h.want = append(h.want, deleteEvent(del))
	a3 := mustPut(t, st, a1.Key, "a3", 0)
	put(a3)
	b2 := mustUpdate(t, st, b1, "b2")
	put(b2)
	return h
}

// deleteEvent is the event of the delete that answered del: the key and the
// delete's revision, no value.
func deleteEvent(del storage.KeyValue) storage.Event {
	return storage.Event{Type: storage.EventDelete, KV: storage.KeyValue{Key: del.Key, ModRevision: del.ModRevision}, Revision: del.ModRevision}
}

func (h history) after(rev int64) []storage.Event {
	var out []storage.Event
	for _, ev := range h.want {
		if ev.Revision > rev {
			out = append(out, ev)
		}
	}
	return out
}

// expectExactly reads events until the last one of want, compares them, then
// writes a marker under prefix and expects it next: so nothing extra was
// queued behind the expected events.
func (s *suite) expectExactly(t *testing.T, st storage.Interface, r *eventReader, want []storage.Event) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("expectExactly needs at least one event")
	}
	got := r.until(want[len(want)-1].Revision)
	if d := cmp.Diff(want, got, equateValues); d != "" {
		t.Fatalf("watch events (-want +got):\n%s", d)
	}
	marker := mustPut(t, st, r.prefix+"zz-marker", "m", 0)
	if ev := r.next(); ev.KV.Key != marker.Key || ev.Revision != marker.ModRevision {
		t.Fatalf("after the expected events: got %v %q at %d, want the marker at %d", ev.Type, ev.KV.Key, ev.Revision, marker.ModRevision)
	}
}

func (s *suite) testWatchReplay(t *testing.T) {
	st := s.newStore(t)
	h := writeHistory(t, st)
	w := mustWatch(t, t.Context(), st, "/registry/leases/", h.start)
	s.expectExactly(t, st, newEventReader(t, w, "/registry/leases/", h.start, s.opts.Timeout), h.want)
}

func (s *suite) testWatchReplayMiddle(t *testing.T) {
	st := s.newStore(t)
	h := writeHistory(t, st)
	// Start at every revision of the history, including ones spent on
	// other prefixes.
	for from := h.start + 1; from < h.want[len(h.want)-1].Revision; from++ {
		ctx, cancel := context.WithCancel(t.Context())
		w := mustWatch(t, ctx, st, "/registry/leases/", from)
		r := newEventReader(t, w, "/registry/leases/", from, s.opts.Timeout)
		want := h.after(from)
		got := r.until(want[len(want)-1].Revision)
		if d := cmp.Diff(want, got, equateValues); d != "" {
			t.Errorf("watch from %d (-want +got):\n%s", from, d)
		}
		cancel()
	}
}

func (s *suite) testWatchLive(t *testing.T) {
	st := s.newStore(t)
	mustPut(t, st, "/registry/leases/ns/before", "x", 0)
	from := mustRevision(t, st)
	w := mustWatch(t, t.Context(), st, "/registry/leases/", from)
	r := newEventReader(t, w, "/registry/leases/", from, s.opts.Timeout)

	a1 := mustPut(t, st, "/registry/leases/ns/a", "a1", 0)
	if ev := r.next(); cmp.Diff(storage.Event{Type: storage.EventPut, KV: a1, Revision: a1.ModRevision}, ev, equateValues) != "" {
		t.Fatalf("live create: got %+v, want the put of %+v", ev, a1)
	}
	a2 := mustUpdate(t, st, a1, "a2")
	if ev := r.next(); cmp.Diff(storage.Event{Type: storage.EventPut, KV: a2, Revision: a2.ModRevision}, ev, equateValues) != "" {
		t.Fatalf("live update: got %+v, want the put of %+v", ev, a2)
	}
	del := mustDelete(t, st, a1.Key, a2.ModRevision)
	if ev := r.next(); cmp.Diff(deleteEvent(del), ev, equateValues) != "" {
		t.Fatalf("live delete: got %+v, want the delete of %+v", ev, del)
	}
}

func (s *suite) testWatchPrefixFilter(t *testing.T) {
	st := s.newStore(t)
	prefix := "/registry/leases/a/"
	from := mustRevision(t, st)
	w := mustWatch(t, t.Context(), st, prefix, from)
	r := newEventReader(t, w, prefix, from, s.opts.Timeout)

	var want []storage.Event
	for _, key := range []string{
		"/registry/leases/a",
		"/registry/leases/a/x",
		"/registry/leases/ab/x",
		"/registry/leases/a/",
		"/registry/leases/a0",
		"/registry/leasesa/x",
		"/registry/leases/b/a/",
		"/registry/leases/a/y/z",
	} {
		kv := mustPut(t, st, key, "v", 0)
		if len(key) >= len(prefix) && key[:len(prefix)] == prefix {
			want = append(want, storage.Event{Type: storage.EventPut, KV: kv, Revision: kv.ModRevision})
		}
	}
	s.expectExactly(t, st, r, want)
}

// testWatchProgress checks that a watcher of one prefix learns about
// revisions spent on other prefixes through progress notes, without waiting
// for a write under its own prefix.
func (s *suite) testWatchProgress(t *testing.T) {
	st := s.newStore(t)
	mine := mustPut(t, st, "/registry/leases/ns/a", "a1", 0)
	from := mustRevision(t, st)
	w := mustWatch(t, t.Context(), st, "/registry/leases/", from)
	r := newEventReader(t, w, "/registry/leases/", from, s.opts.Timeout)

	last := mustPut(t, st, "/registry/services/endpoints/ns/e", "0", 0)
	for i := 1; i < 5; i++ {
		last = mustUpdate(t, st, last, string(rune('0'+i)))
	}
	if ev := r.untilProgress(last.ModRevision); ev.Revision != last.ModRevision {
		t.Errorf("progress note at %d, want the store revision %d", ev.Revision, last.ModRevision)
	}

	// Events after a progress note still arrive, above it.
	next := mustUpdate(t, st, mine, "a2")
	if ev := r.next(); ev.Revision != next.ModRevision || ev.KV.Key != mine.Key {
		t.Errorf("after progress: got %v %q at %d, want the put at %d", ev.Type, ev.KV.Key, ev.Revision, next.ModRevision)
	}

	// A watch that starts behind, with only other prefixes' writes in its
	// way, is told where the store is once it has caught up.
	rev := mustRevision(t, st)
	mustPut(t, st, "/registry/namespaces/ns", "n", 0)
	w2 := mustWatch(t, t.Context(), st, "/registry/leases/other/", from)
	r2 := newEventReader(t, w2, "/registry/leases/other/", from, s.opts.Timeout)
	if ev := r2.untilProgress(rev + 1); ev.Revision != rev+1 {
		t.Errorf("progress note of a replaying watch at %d, want the store revision %d", ev.Revision, rev+1)
	}
}

func (s *suite) testWatchCancel(t *testing.T) {
	st := s.newStore(t)
	from := mustRevision(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	w := mustWatch(t, ctx, st, "/registry/leases/", from)
	r := newEventReader(t, w, "/registry/leases/", from, s.opts.Timeout)
	kv := mustPut(t, st, "/registry/leases/ns/a", "a1", 0)
	if ev := r.next(); ev.Revision != kv.ModRevision {
		t.Fatalf("got event at %d, want %d", ev.Revision, kv.ModRevision)
	}
	cancel()
	if err := r.waitClosed(); err != nil {
		t.Errorf("Err() after the watch's context ended = %v, want nil", err)
	}
	// The store keeps working for others.
	mustUpdate(t, st, kv, "a2")

	// A watch whose context has already ended closes at once.
	w2, err := st.Watch(ctx, "/registry/leases/", from)
	if err == nil {
		r2 := newEventReader(t, w2, "/registry/leases/", from, s.opts.Timeout)
		if err := r2.waitClosed(); err != nil {
			t.Errorf("Err() of a watch started with an ended context = %v, want nil", err)
		}
	}
}

func (s *suite) testWatchCompacted(t *testing.T) {
	if s.opts.Compact == nil {
		t.Skip("Options.Compact not set")
	}
	st := s.newStore(t)
	h := writeHistory(t, st)
	rev := mustRevision(t, st)
	s.opts.Compact(t, st, rev)

	for _, from := range []int64{h.start, h.start + 1, rev - 5} {
		_, err := st.Watch(t.Context(), "/registry/leases/", from)
		if !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("Watch from %d after compacting up to %d: got %v, want ErrCompacted", from, rev, err)
		}
	}

	// Watching from the present still works.
	cur := mustRevision(t, st)
	w := mustWatch(t, t.Context(), st, "/registry/leases/", cur)
	r := newEventReader(t, w, "/registry/leases/", cur, s.opts.Timeout)
	kv := mustPut(t, st, "/registry/leases/ns/after", "x", 0)
	if ev := r.next(); ev.Revision != kv.ModRevision {
		t.Errorf("watch after compaction: event at %d, want %d", ev.Revision, kv.ModRevision)
	}
}

func (s *suite) testClose(t *testing.T) {
	st := s.newStore(t)
	kv := mustPut(t, st, "/registry/leases/ns/a", "a1", 0)
	from := mustRevision(t, st)
	w := mustWatch(t, t.Context(), st, "/registry/leases/", from)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	r := newEventReader(t, w, "/registry/leases/", from, s.opts.Timeout)
	if err := r.waitClosed(); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Err() of a watch open at Close = %v, want ErrUnavailable", err)
	}

	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := st.Get(ctx, kv.Key); return err }},
		{"List", func() error { _, err := st.List(ctx, "/registry/"); return err }},
		{"Put create", func() error { _, err := st.Put(ctx, "/registry/leases/ns/b", []byte("x"), 0); return err }},
		{"Put update", func() error { _, err := st.Put(ctx, kv.Key, []byte("x"), kv.ModRevision); return err }},
		{"Delete", func() error { _, err := st.Delete(ctx, kv.Key, kv.ModRevision); return err }},
		{"Watch", func() error { _, err := st.Watch(ctx, "/registry/", from); return err }},
		{"Revision", func() error { _, err := st.Revision(ctx); return err }},
	} {
		if err := tc.call(); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s after Close: got %v, want ErrUnavailable", tc.name, err)
		}
	}
}
