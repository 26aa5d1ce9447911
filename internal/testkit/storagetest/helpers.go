package storagetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/internal/storage"
)

// equateValues treats a nil and an empty value as equal: engines may return
// either for a zero-length value.
var equateValues = cmpopts.EquateEmpty()

func mustPut(t *testing.T, s storage.Interface, key, value string, expected int64, opts ...storage.PutOption) storage.KeyValue {
	t.Helper()
	kv, err := s.Put(t.Context(), key, []byte(value), expected, opts...)
	if err != nil {
		t.Fatalf("Put(%q, expected=%d): %v", key, expected, err)
	}
	return kv
}

// mustUpdate replaces prev's value. An engine may leave an update's
// CreateRevision 0 (see storage.Interface.Put); it must not report another
// than prev's. The result carries prev's, to compare with reads.
func mustUpdate(t *testing.T, s storage.Interface, prev storage.KeyValue, value string, opts ...storage.PutOption) storage.KeyValue {
	t.Helper()
	kv := mustPut(t, s, prev.Key, value, prev.ModRevision, opts...)
	switch kv.CreateRevision {
	case 0:
		kv.CreateRevision = prev.CreateRevision
	case prev.CreateRevision:
	default:
		t.Errorf("update of %q: CreateRevision %d, want %d (or 0)", prev.Key, kv.CreateRevision, prev.CreateRevision)
	}
	return kv
}

func mustDelete(t *testing.T, s storage.Interface, key string, expected int64) storage.KeyValue {
	t.Helper()
	kv, err := s.Delete(t.Context(), key, expected)
	if err != nil {
		t.Fatalf("Delete(%q, expected=%d): %v", key, expected, err)
	}
	return kv
}

func mustGet(t *testing.T, s storage.Interface, key string) storage.KeyValue {
	t.Helper()
	kv, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return kv
}

func mustList(t *testing.T, s storage.Interface, prefix string) storage.ListResult {
	t.Helper()
	res, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return res
}

func mustRevision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.Revision(t.Context())
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

func mustWatch(t *testing.T, ctx context.Context, s storage.Interface, prefix string, from int64) storage.Watch {
	t.Helper()
	w, err := s.Watch(ctx, prefix, from)
	if err != nil {
		t.Fatalf("Watch(%q, from=%d): %v", prefix, from, err)
	}
	return w
}

// wantConflict checks that err is a *storage.ConflictError for key and
// expected, matching errors.Is(err, storage.ErrConflict), and returns it.
func wantConflict(t *testing.T, err error, key string, expected int64) *storage.ConflictError {
	t.Helper()
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("got error %v, want one wrapping storage.ErrConflict", err)
	}
	var ce *storage.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v (%T), want a *storage.ConflictError", err, err)
	}
	if ce.Key != key || ce.Expected != expected {
		t.Errorf("ConflictError{Key: %q, Expected: %d}, want {Key: %q, Expected: %d}", ce.Key, ce.Expected, key, expected)
	}
	if errors.Is(err, storage.ErrNotFound) {
		t.Errorf("conflict error %v also matches ErrNotFound", err)
	}
	return ce
}

func diffKV(t *testing.T, what string, got, want storage.KeyValue) {
	t.Helper()
	if d := cmp.Diff(want, got, equateValues); d != "" {
		t.Errorf("%s: KeyValue mismatch (-want +got):\n%s", what, d)
	}
}

// eventReader reads a Watch and checks, on every event, what the contract
// promises of all of them:
//   - put and delete events have increasing revisions, all above the
//     watch's start and above every progress note already seen (a
//     progress note says every event up to its revision was delivered);
//     only deletes of one expiry may share a revision;
//   - Revision equals KV.ModRevision, and keys carry the watched prefix;
//   - progress notes never go below the last event or a previous note.
//
// With contiguous set, events must also have consecutive revisions: use it
// only when every write in the store goes under the watched prefix.
type eventReader struct {
	t          *testing.T
	w          storage.Watch
	prefix     string
	timeout    time.Duration
	contiguous bool

	last     int64 // revision of the last put or delete, or the watch start
	lastType storage.EventType
	progress int64 // highest progress revision seen
}

func newEventReader(t *testing.T, w storage.Watch, prefix string, from int64, timeout time.Duration) *eventReader {
	return &eventReader{t: t, w: w, prefix: prefix, timeout: timeout, last: from, progress: from}
}

// recv returns the next event, progress notes included. It fails the test
// if none arrives within the timeout or the watch ends.
func (r *eventReader) recv() storage.Event {
	r.t.Helper()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	select {
	case ev, ok := <-r.w.Events():
		if !ok {
			r.t.Fatalf("watch of %q ended early: Err() = %v", r.prefix, r.w.Err())
		}
		r.check(ev)
		return ev
	case <-timer.C:
		r.t.Fatalf("watch of %q: no event within %v (last event revision %d, last progress %d)", r.prefix, r.timeout, r.last, r.progress)
		panic("unreachable")
	}
}

func (r *eventReader) check(ev storage.Event) {
	r.t.Helper()
	switch ev.Type {
	case storage.EventProgress:
		if ev.Revision < r.last || ev.Revision < r.progress {
			r.t.Errorf("progress note at revision %d goes back (last event %d, last progress %d)", ev.Revision, r.last, r.progress)
		}
		r.progress = max(r.progress, ev.Revision)
	case storage.EventPut, storage.EventDelete:
		sharedExpiry := ev.Type == storage.EventDelete && r.lastType == storage.EventDelete && ev.Revision == r.last && !r.contiguous
		if (ev.Revision <= r.last && !sharedExpiry) || ev.Revision <= r.progress {
			r.t.Errorf("event %v %q at revision %d is not after last event %d and last progress %d", ev.Type, ev.KV.Key, ev.Revision, r.last, r.progress)
		}
		if r.contiguous && ev.Revision != r.last+1 {
			r.t.Errorf("event %q at revision %d follows %d: gap or duplicate", ev.KV.Key, ev.Revision, r.last)
		}
		if ev.Revision != ev.KV.ModRevision {
			r.t.Errorf("event %q: Revision %d != KV.ModRevision %d", ev.KV.Key, ev.Revision, ev.KV.ModRevision)
		}
		if !strings.HasPrefix(ev.KV.Key, r.prefix) {
			r.t.Errorf("event for key %q outside watched prefix %q", ev.KV.Key, r.prefix)
		}
		if ev.Type == storage.EventDelete && (ev.KV.CreateRevision != 0 || ev.KV.Value != nil) {
			r.t.Errorf("delete event %q: CreateRevision %d, value %q; want neither", ev.KV.Key, ev.KV.CreateRevision, ev.KV.Value)
		}
		if ev.Type == storage.EventPut && (ev.KV.CreateRevision <= 0 || ev.KV.CreateRevision > ev.KV.ModRevision) {
			r.t.Errorf("event %q: CreateRevision %d not in (0, ModRevision %d]", ev.KV.Key, ev.KV.CreateRevision, ev.KV.ModRevision)
		}
		r.last, r.lastType = ev.Revision, ev.Type
	default:
		r.t.Errorf("event of unknown type %v", ev.Type)
	}
}

// next returns the next put or delete event, skipping progress notes.
func (r *eventReader) next() storage.Event {
	r.t.Helper()
	for {
		if ev := r.recv(); ev.Type != storage.EventProgress {
			return ev
		}
	}
}

// until collects put and delete events until the watch has reported rev,
// through an event at rev or a progress note at or above it.
func (r *eventReader) until(rev int64) []storage.Event {
	r.t.Helper()
	var out []storage.Event
	for r.last < rev && r.progress < rev {
		if ev := r.recv(); ev.Type != storage.EventProgress {
			out = append(out, ev)
		}
	}
	return out
}

// untilProgress waits for a progress note at or above rev. It fails the test
// if a put or delete event arrives instead.
func (r *eventReader) untilProgress(rev int64) storage.Event {
	r.t.Helper()
	for {
		ev := r.recv()
		if ev.Type != storage.EventProgress {
			r.t.Fatalf("unexpected event %v %q at revision %d while waiting for progress at %d", ev.Type, ev.KV.Key, ev.Revision, rev)
		}
		if ev.Revision >= rev {
			return ev
		}
	}
}

// waitClosed drains the watch until its channel is closed and returns Err.
func (r *eventReader) waitClosed() error {
	r.t.Helper()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-r.w.Events():
			if !ok {
				return r.w.Err()
			}
			r.check(ev)
		case <-timer.C:
			r.t.Fatalf("watch of %q still open %v after it should have ended", r.prefix, r.timeout)
		}
	}
}

// unboundedWatch consumes a watch as fast as the engine delivers and queues
// the events in memory, so that a test which reads them only later does not
// turn into a slow watcher that the engine may rightly cancel.
type unboundedWatch struct {
	w   storage.Watch
	out chan storage.Event
}

// unbounded wraps w; its goroutine ends when w ends and its queue is read,
// or when ctx ends.
func unbounded(ctx context.Context, w storage.Watch) storage.Watch {
	u := &unboundedWatch{w: w, out: make(chan storage.Event)}
	go func() {
		defer close(u.out)
		var queue []storage.Event
		in := w.Events()
		for in != nil || len(queue) > 0 {
			var out chan<- storage.Event
			var head storage.Event
			if len(queue) > 0 {
				out, head = u.out, queue[0]
			}
			select {
			case ev, ok := <-in:
				if !ok {
					in = nil
					continue
				}
				queue = append(queue, ev)
			case out <- head:
				queue = queue[1:]
			case <-ctx.Done():
				return
			}
		}
	}()
	return u
}

func (u *unboundedWatch) Events() <-chan storage.Event { return u.out }
func (u *unboundedWatch) Err() error                   { return u.w.Err() }
