package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// clock is a time the test moves by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

// newHistoryAt is newHistory with a retention and a clock of the test's.
func newHistoryAt(t *testing.T, window int, retention time.Duration, clk *clock) *history {
	t.Helper()
	c := New(Config{Prefix: prefix, Namespaced: true, Decode: decodeThing, Window: window, Retention: retention, Now: clk.Now})
	h := &history{t: t, c: c, rev: 10}
	if err := c.reset(nil, h.rev); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRetentionDropsOldEvents: events that entered the window longer than
// the retention ago leave it at the next expiry, however much room the
// window has; younger ones stay. A watch from before them is then too
// old, a watcher that had not read them falls behind, and their objects
// are no longer referenced by the window.
func TestRetentionDropsOldEvents(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHistoryAt(t, 100, time.Minute, clk)
	start := h.rev
	slow, err := h.c.CursorAfter(start)
	if err != nil {
		t.Fatal(err)
	}
	a := h.put("a", "")
	b := h.del("a")
	clk.advance(30 * time.Second)
	c := h.put("c", "")

	// Within the retention, everything stays.
	clk.advance(30 * time.Second)
	h.c.expire()
	if got := h.c.Oldest(); got != start {
		t.Fatalf("Oldest() = %d after an expiry within the retention, want %d", got, start)
	}
	if _, err := h.c.CursorAfter(start); err != nil {
		t.Fatalf("CursorAfter(%d) within the retention: %v", start, err)
	}

	// a and b are now older than a minute; c is not.
	clk.advance(time.Second)
	h.c.expire()
	if got := h.c.Oldest(); got != b {
		t.Errorf("Oldest() = %d, want %d (the last dropped event's)", got, b)
	}
	for _, rev := range []int64{start, a} {
		if _, err := h.c.CursorAfter(rev); !errors.Is(err, ErrExpired) {
			t.Errorf("CursorAfter(%d) = %v, want ErrExpired", rev, err)
		}
		if _, err := h.c.StateAt(rev); !errors.Is(err, ErrExpired) {
			t.Errorf("StateAt(%d) = %v, want ErrExpired", rev, err)
		}
	}
	if _, _, _, err := slow.Read(make([]Event, 0, 8)); !errors.Is(err, ErrFellBehind) {
		t.Errorf("a cursor before the dropped events: %v, want ErrFellBehind", err)
	}
	cur, err := h.c.CursorAfter(b)
	if err != nil {
		t.Fatal(err)
	}
	events, rev, _, err := cur.Read(make([]Event, 0, 8))
	if err != nil || rev != c || len(events) != 1 || events[0].Object.Name != "c" {
		t.Fatalf("replay after %d: %d events at %d, %v; want c at %d", b, len(events), rev, err, c)
	}
	// The dropped events' slots hold nothing: their objects can be
	// collected.
	for i := range h.c.events.buf {
		if ev := &h.c.events.buf[i]; ev.Object != nil && ev.Rev != c {
			t.Errorf("slot %d still holds the event at %d", i, ev.Rev)
		}
	}

	// Once c is old too the window is empty, and a watch from the
	// current revision still starts.
	clk.advance(time.Minute)
	h.c.expire()
	if got := h.c.Oldest(); got != c {
		t.Errorf("Oldest() = %d, want %d", got, c)
	}
	if _, err := h.c.CursorAfter(c); err != nil {
		t.Errorf("CursorAfter(%d) with an empty window: %v", c, err)
	}
	d := h.put("d", "")
	if events, rev, _, err := cur.Read(make([]Event, 0, 8)); err != nil || rev != d || len(events) != 1 {
		t.Errorf("a cursor that kept up, after the window emptied: %d events at %d, %v; want d at %d", len(events), rev, err, d)
	}
}

// TestRetentionDropsOldSnapshots: a list snapshot retained longer than
// the retention ago is dropped at the next expiry, even when the window
// could not rebuild it, while a younger one stays.
func TestRetentionDropsOldSnapshots(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// A window of one: only retained snapshots serve older revisions.
	h := newHistoryAt(t, 1, time.Minute, clk)
	h.put("a", "")
	old := h.c.Current()
	h.c.Retain(old)
	clk.advance(40 * time.Second)
	h.put("b", "")
	young := h.c.Current()
	h.c.Retain(young)
	h.put("c", "")
	h.put("d", "")

	clk.advance(20 * time.Second)
	h.c.expire()
	for _, s := range []*State{old, young} {
		if got, err := h.c.StateAt(s.Rev); err != nil || got != s {
			t.Fatalf("StateAt(%d) within the retention = %v, %v; want the retained snapshot", s.Rev, got, err)
		}
	}

	clk.advance(time.Second)
	h.c.expire()
	if _, err := h.c.StateAt(old.Rev); !errors.Is(err, ErrExpired) {
		t.Errorf("StateAt(%d) of a snapshot past the retention = %v, want ErrExpired", old.Rev, err)
	}
	if got, err := h.c.StateAt(young.Rev); err != nil || got != young {
		t.Errorf("StateAt(%d) of a younger snapshot = %v, %v", young.Rev, got, err)
	}
	if n := len(h.c.snapshots); n != 1 {
		t.Errorf("%d snapshots kept, want 1", n)
	}
	for _, r := range h.c.snapshots[len(h.c.snapshots):cap(h.c.snapshots)] {
		if r.state != nil {
			t.Errorf("the dropped snapshot at %d is still referenced beyond the slice", r.state.Rev)
		}
	}
}

// TestFeederExpires: the feeder applies the retention by itself, with no
// write to wake it: after a burst of writes and a quiet retention, the
// window no longer holds them. Time is synctest's.
func TestFeederExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := embedded.Open("/store", embedded.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		c := New(Config{Prefix: prefix, Namespaced: true, Decode: decodeThing, Retention: time.Minute})
		f := NewFeeder(store, "/registry/", slog.New(slog.DiscardHandler), c)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = f.Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		<-f.Ready()
		start := c.Current().Rev
		var last storage.KeyValue
		for i := range 10 {
			if last, err = store.Put(ctx, fmt.Sprintf("%sns/t%d", prefix, i), nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.WaitFor(ctx, last.ModRevision); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CursorAfter(start); err != nil {
			t.Fatalf("CursorAfter(%d) right after the burst: %v", start, err)
		}
		time.Sleep(time.Minute + 2*expireInterval)
		synctest.Wait()
		if _, err := c.CursorAfter(start); !errors.Is(err, ErrExpired) {
			t.Errorf("CursorAfter(%d) a retention after the burst: %v, want ErrExpired", start, err)
		}
		if got := c.Oldest(); got != last.ModRevision {
			t.Errorf("Oldest() = %d, want %d", got, last.ModRevision)
		}
	})
}
