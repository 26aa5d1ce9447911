package watchcache

import (
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/codec"
)

// Event is one change of a resource, as watchers see it.
type Event struct {
	Type watch.EventType // Added, Modified or Deleted
	// Object is the new state; for Deleted, the last state with Rev set to
	// the delete revision.
	Object *Object
	// Prev is the state before the change; nil for Added.
	Prev *Object
	// Rev is the revision of the change.
	Rev int64

	// Memo keeps the event's encodings, shared by all watchers.
	Memo *codec.EventMemo

	// added is when the event entered the window.
	added time.Time
}

// ring is a bounded window of the most recent events, addressed by
// absolute sequence numbers so that readers can hold a position across
// wrap-around: positions [start, end) are present.
//
// Its buffer grows as events come, up to the window's capacity: most
// kinds see a handful of changes, and a full window for each (10,000
// events of 72 bytes) would be memory the garbage collector scans at
// every cycle for nothing.
type ring struct {
	buf        []Event
	capacity   int
	start, end int64
	// base is a revision such that every event after it is in the ring.
	base int64
}

// minRing is the buffer a ring starts with.
const minRing = 64

func (r *ring) init(capacity int) {
	r.capacity = capacity
	r.buf = make([]Event, min(capacity, minRing))
}

// grow doubles the buffer, up to the capacity; events keep their
// positions.
func (r *ring) grow() {
	buf := make([]Event, min(2*len(r.buf), r.capacity))
	for pos := r.start; pos < r.end; pos++ {
		buf[pos%int64(len(buf))] = *r.at(pos)
	}
	r.buf = buf
}

func (r *ring) at(pos int64) *Event { return &r.buf[pos%int64(len(r.buf))] }

// push appends ev, added at now, evicting the oldest event when full.
func (r *ring) push(ev Event, now time.Time) {
	if r.end-r.start == int64(len(r.buf)) {
		if len(r.buf) < r.capacity {
			r.grow()
		} else {
			r.evict()
		}
	}
	ev.Memo = &codec.EventMemo{}
	ev.added = now
	*r.at(r.end) = ev
	r.end++
}

// evict drops the oldest event.
func (r *ring) evict() {
	ev := r.at(r.start)
	r.base = ev.Rev
	// Its object now decodes on demand (the event held the only reason
	// to keep it decoded).
	ev.Object.forget()
	*ev = Event{}
	r.start++
}

// evictBefore drops the events added before cutoff.
func (r *ring) evictBefore(cutoff time.Time) {
	for r.start < r.end && r.at(r.start).added.Before(cutoff) {
		r.evict()
	}
}

// reset empties the ring; history now begins after rev. Positions keep
// increasing so that old readers notice.
func (r *ring) reset(rev int64) {
	for i := r.start; i < r.end; i++ {
		r.at(i).Object.forget()
		*r.at(i) = Event{}
	}
	r.start = r.end
	r.base = rev
}

// find returns the position of the first event with a revision greater
// than rev, or false if events after rev were evicted.
func (r *ring) find(rev int64) (int64, bool) {
	if rev < r.base {
		return 0, false
	}
	lo, hi := r.start, r.end
	for lo < hi {
		mid := lo + (hi-lo)/2
		if r.at(mid).Rev <= rev {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, true
}
