package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// TestMemberKillDuringWrites runs compare-and-swap counters on a
// three-member cluster while a follower and then the leader are killed
// (SIGKILL) and restarted, and checks that
//   - no acknowledged write is lost: every one is in the final state and
//     in the watch history, at the revision it was acknowledged with;
//   - a write that failed either never happened or happened once: each
//     counter's history counts up by one, without gaps or repeats;
//   - the watch survives the faults (resuming where it was) and the
//     store serves again after each one.
func TestMemberKillDuringWrites(t *testing.T) {
	t.Parallel()
	const (
		writers = 8
		prefix  = "/registry/leases/faults/"
		phase   = 40 // acknowledged writes between faults
	)
	c := etcdtest.Start(t, etcdtest.Config{Size: 3})
	s := open(t, c, etcd.Options{CompactInterval: -1}, false)
	ctx := t.Context()
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hist := collect(t, s, prefix, start)

	type ack struct {
		key   string
		value int
	}
	var (
		mu     sync.Mutex // guards acked and last
		acked  = map[int64]ack{}
		last   = map[string]int{}
		count  atomic.Int64
		failed atomic.Int64
	)
	stopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("%sc%d", prefix, w)
			kv, err := s.Put(ctx, key, []byte("0"), 0)
			if err != nil {
				t.Errorf("creating %s: %v", key, err)
				return
			}
			for stopCtx.Err() == nil {
				n, _ := strconv.Atoi(string(kv.Value))
				next, err := s.Put(stopCtx, key, []byte(strconv.Itoa(n+1)), kv.ModRevision)
				var ce *storage.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					acked[next.ModRevision] = ack{key, n + 1}
					last[key] = n + 1
					mu.Unlock()
					count.Add(1)
					kv = next
				case errors.As(err, &ce) && ce.Current != nil:
					// An earlier write that failed was applied after all.
					kv = *ce.Current
				case stopCtx.Err() != nil:
					return
				default:
					// Outcome unknown: read the current state and go on.
					failed.Add(1)
					for stopCtx.Err() == nil {
						if kv, err = s.Get(stopCtx, key); err == nil {
							break
						}
						pause(stopCtx)
					}
				}
			}
		})
	}
	progress := func(what string) {
		t.Helper()
		target := count.Load() + phase
		deadline := time.Now().Add(30 * time.Second)
		for count.Load() < target {
			if time.Now().After(deadline) {
				t.Fatalf("%s: only %d acknowledged writes, want %d", what, count.Load(), target)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	progress("before the faults")
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower *etcdtest.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
			break
		}
	}
	follower.Kill()
	progress("with a follower killed")
	if err := follower.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	progress("after the follower restarted")
	leader.Kill()
	killed := time.Now()
	progress("with the leader killed")
	t.Logf("writes resumed %v after the leader was killed", time.Since(killed))
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	progress("after the leader restarted")
	stop()
	wg.Wait()
	t.Logf("%d acknowledged writes, %d with an unknown outcome", count.Load(), failed.Load())
	if t.Failed() {
		return
	}

	// The final state holds every acknowledged write (or a later one).
	final, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.KVs) != writers {
		t.Fatalf("List: %d counters, want %d", len(res.KVs), writers)
	}
	for _, kv := range res.KVs {
		n, _ := strconv.Atoi(string(kv.Value))
		if n < last[kv.Key] {
			t.Errorf("%s = %d, but %d was acknowledged", kv.Key, n, last[kv.Key])
		}
	}

	// The history counts each counter up by one, and holds every
	// acknowledged write at its revision.
	events := hist.until(t, final)
	seen := map[string]int{}
	byRev := map[int64]storage.Event{}
	for _, ev := range events {
		byRev[ev.Revision] = ev
		n, _ := strconv.Atoi(string(ev.KV.Value))
		prev, ok := seen[ev.KV.Key]
		switch {
		case ev.Type != storage.EventPut:
			t.Errorf("unexpected %v of %s at %d", ev.Type, ev.KV.Key, ev.Revision)
		case !ok && (n != 0 || ev.KV.CreateRevision != ev.Revision):
			t.Errorf("first event of %s at %d: %q created at %d, want the creation of 0", ev.KV.Key, ev.Revision, ev.KV.Value, ev.KV.CreateRevision)
		case ok && n != prev+1:
			t.Errorf("event of %s at %d: %q, want %d after %d", ev.KV.Key, ev.Revision, ev.KV.Value, prev+1, prev)
		}
		seen[ev.KV.Key] = n
	}
	for rev, a := range acked {
		ev, ok := byRev[rev]
		if !ok || ev.KV.Key != a.key || string(ev.KV.Value) != strconv.Itoa(a.value) {
			t.Errorf("write of %d to %s acknowledged at %d: the history has %+v", a.value, a.key, rev, ev)
		}
	}
}

// history collects a watch's events in the background, watching again
// from the last revision it reported when a watch fails, as the watch
// cache's feeder would (with a list).
type history struct {
	mu       sync.Mutex // guards events, reported, restarts
	events   []storage.Event
	reported int64
	restarts int
}

func collect(t *testing.T, s storage.Interface, prefix string, from int64) *history {
	h := &history{reported: from}
	ctx := t.Context()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after t.Context is cancelled
	wg.Go(func() {
		for ctx.Err() == nil {
			h.mu.Lock()
			from := h.reported
			h.mu.Unlock()
			w, err := s.Watch(ctx, prefix, from)
			if err != nil {
				pause(ctx) // unavailable for now; the store recovers
				continue
			}
			for ev := range w.Events() {
				h.mu.Lock()
				if ev.Type != storage.EventProgress {
					h.events = append(h.events, ev)
				}
				h.reported = ev.Revision
				h.mu.Unlock()
			}
			if err := w.Err(); err != nil {
				if errors.Is(err, storage.ErrCompacted) {
					t.Errorf("watch of %s: %v", prefix, err)
					return
				}
				h.mu.Lock()
				h.restarts++
				h.mu.Unlock()
			}
		}
	})
	return h
}

// until waits for the history to reach rev and returns its events.
func (h *history) until(t *testing.T, rev int64) []storage.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		reported, restarts := h.reported, h.restarts
		events := append([]storage.Event(nil), h.events...)
		h.mu.Unlock()
		if reported >= rev {
			t.Logf("watch history: %d events, %d watch restarts", len(events), restarts)
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch history reached %d, want %d", reported, rev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pause waits a little before a retry.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}
