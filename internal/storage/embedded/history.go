package embedded

import (
	"fmt"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/internal/storage"
)

// eventOverhead approximates the memory of one retained event beyond its
// key and value bytes (the Event struct and slice headers).
const eventOverhead = 96

// history is the ring of recent committed events that Watch replays, and
// the point where the committer publishes progress to readers and watchers.
//
// Every committed revision is exactly one event (each write changes one
// key), so the event of revision r lives in slot r % len(events) and the
// retained window is the contiguous range [oldest, newest]. The window is
// bounded by count (len(events)) and by bytes (maxBytes); the oldest events
// leave first. A window is empty when oldest == newest+1, as after Open.
type history struct {
	mu       sync.RWMutex    // guards every field below; taken after Store.mu, never before
	events   []storage.Event // ring; slot of revision r is r % len(events)
	oldest   int64           // oldest retained revision
	newest   int64           // newest committed revision
	bytes    int64           // approximate memory held by retained events
	maxBytes int64
	// notify is closed and replaced whenever newest advances; waiters take
	// it under mu, then re-check their condition after it closes.
	notify chan struct{}
}

func newHistory(size int, maxBytes int64, rev int64) *history {
	return &history{
		events:   make([]storage.Event, size),
		oldest:   rev + 1,
		newest:   rev,
		maxBytes: maxBytes,
		notify:   make(chan struct{}),
	}
}

func eventBytes(ev *storage.Event) int64 {
	return int64(eventOverhead + len(ev.KV.Key) + len(ev.KV.Value))
}

// append adds the events of one committed batch, which must carry the
// revisions newest+1, newest+2, ... in order, then advances newest to rev
// and wakes every waiter. evs may be empty when rev == newest.
func (h *history) append(evs []storage.Event, rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if ev.Revision != h.newest+1 {
			// The committer assigns consecutive revisions; anything else
			// would silently break every watcher's gap-free promise.
			panic(fmt.Sprintf("embedded: history append of revision %d after %d", ev.Revision, h.newest))
		}
		if h.newest+1-h.oldest >= int64(len(h.events)) {
			h.evictOldest()
		}
		h.events[ev.Revision%int64(len(h.events))] = *ev
		h.bytes += eventBytes(ev)
		h.newest = ev.Revision
	}
	for h.bytes > h.maxBytes && h.oldest < h.newest {
		h.evictOldest()
	}
	if rev != h.newest {
		panic(fmt.Sprintf("embedded: history at %d after a batch ending at %d", h.newest, rev))
	}
	close(h.notify)
	h.notify = make(chan struct{})
}

// evictOldest drops the oldest retained event. Requires mu held and a
// non-empty window.
func (h *history) evictOldest() {
	slot := &h.events[h.oldest%int64(len(h.events))]
	h.bytes -= eventBytes(slot)
	*slot = storage.Event{} // release the key and values
	h.oldest++
}

// state returns the newest revision and the channel that closes when it
// advances.
func (h *history) state() (newest int64, notify <-chan struct{}) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.newest, h.notify
}

// available reports whether a watch that has seen every event up to after
// can continue from the retained window.
func (h *history) available(after int64) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return after+1 >= h.oldest
}

// readResult is one step of a watcher through the ring.
type readResult struct {
	events  []storage.Event // matching events, in revision order
	scanned int64           // every revision up to here has been looked at
	newest  int64           // newest committed revision at the time of the read
	notify  <-chan struct{} // closes when newest advances past the read
}

// read appends to dst the events under prefix with revisions in
// (after, after+maxScan], as far as newest, and reports how far it looked.
// It fails with storage.ErrCompacted when revision after+1 has already left
// the window. Holding the read lock for at most maxScan slots keeps the
// committer's appends from waiting long behind readers.
func (h *history) read(after int64, prefix string, dst []storage.Event, maxScan int64) (readResult, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if after+1 < h.oldest {
		return readResult{}, fmt.Errorf("%w: watch needs revision %d, history starts at %d", storage.ErrCompacted, after+1, h.oldest)
	}
	end := min(h.newest, after+maxScan)
	for rev := after + 1; rev <= end; rev++ {
		ev := &h.events[rev%int64(len(h.events))]
		if strings.HasPrefix(ev.KV.Key, prefix) {
			dst = append(dst, *ev)
		}
	}
	return readResult{events: dst, scanned: max(after, end), newest: h.newest, notify: h.notify}, nil
}
