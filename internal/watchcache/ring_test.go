package watchcache

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// TestRingGrows checks the ring against a model (the last capacity
// events pushed) while its buffer grows from minRing, with evictions by
// age along the way so that growth happens with the window wrapped
// around the buffer.
func TestRingGrows(t *testing.T) {
	for _, capacity := range []int{1, 5, minRing, minRing + 1, 1000} {
		var r ring
		r.init(capacity)
		r.reset(0)
		var model []int64 // revisions in the window, oldest first
		held := 0         // the most events the window held at once
		now := time.Unix(0, 0)
		for rev := int64(1); rev <= 3000; rev++ {
			now = now.Add(time.Second)
			r.push(Event{Type: watch.Modified, Rev: rev}, now)
			model = append(model, rev)
			if len(model) > capacity {
				model = model[1:]
			}
			held = max(held, len(model))
			if rev%97 == 0 {
				// Keep the last 10 s (10 events): the window's start moves
				// while the buffer is not full.
				r.evictBefore(now.Add(-9 * time.Second))
				if len(model) > 10 {
					model = model[len(model)-10:]
				}
			}
			if len(r.buf) > capacity {
				t.Fatalf("capacity %d: buffer of %d", capacity, len(r.buf))
			}
			if got := int(r.end - r.start); got != len(model) {
				t.Fatalf("capacity %d, rev %d: %d events, want %d", capacity, rev, got, len(model))
			}
			for i, want := range model {
				if got := r.at(r.start + int64(i)).Rev; got != want {
					t.Fatalf("capacity %d, rev %d: position %d holds %d, want %d", capacity, rev, i, got, want)
				}
			}
			// Every revision after base is present: a watch from base
			// starts at the window's first event.
			if pos, ok := r.find(r.base); !ok || pos != r.start {
				t.Fatalf("capacity %d, rev %d: find(base %d) = %d, %v; want %d", capacity, rev, r.base, pos, ok, r.start)
			}
			if model[0] > 1 && r.base != model[0]-1 {
				t.Fatalf("capacity %d, rev %d: base %d, want %d", capacity, rev, r.base, model[0]-1)
			}
		}
		// The buffer doubled only when full.
		want := min(capacity, minRing)
		for want < held {
			want = min(2*want, capacity)
		}
		if len(r.buf) != want {
			t.Errorf("capacity %d: buffer of %d after holding at most %d events, want %d", capacity, len(r.buf), held, want)
		}
	}
}

// TestRingStaysSmall: a window that never holds more than a few events
// keeps its first buffer.
func TestRingStaysSmall(t *testing.T) {
	var r ring
	r.init(10000)
	now := time.Unix(0, 0)
	for rev := int64(1); rev <= 1000; rev++ {
		now = now.Add(time.Second)
		r.push(Event{Type: watch.Modified, Rev: rev}, now)
		r.evictBefore(now.Add(-5 * time.Second))
	}
	if len(r.buf) != minRing {
		t.Errorf("buffer of %d events for a window of at most 6, want %d", len(r.buf), minRing)
	}
}
