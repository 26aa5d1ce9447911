package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/storage"
)

// testConcurrentCounters runs many writers that increment shared counters
// with compare-and-swap, retrying on conflict with the value the conflict
// carries, while watchers and a lister look on. Every write in the store is
// an increment (after the counters are created), which gives exact checks:
//   - no lost update: the counters add up to the number of acknowledged
//     increments, and the store revision to the number of writes;
//   - Revision() is at or above every write acknowledged before the call;
//   - a List at revision R sees exactly R - created increments (snapshot
//     consistency: no torn or partial view);
//   - a watcher of all counters sees every revision exactly once, in order,
//     each value one above the one before; a watcher of one counter sees
//     exactly that counter's writes.
func (s *suite) testConcurrentCounters(t *testing.T) {
	const (
		writers    = 32
		increments = 25 // per writer
		counters   = 8
		prefix     = "/registry/counters/"
	)
	st := s.newStore(t)
	ctx := t.Context()
	start := mustRevision(t, st)
	key := func(i int) string { return fmt.Sprintf("%sc%d", prefix, i) }

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	all := newEventReader(t, unbounded(watchCtx, mustWatch(t, watchCtx, st, prefix, start)), prefix, start, s.opts.Timeout)
	all.contiguous = true
	one := newEventReader(t, unbounded(watchCtx, mustWatch(t, watchCtx, st, key(3), start)), key(3), start, s.opts.Timeout)

	for i := range counters {
		mustPut(t, st, key(i), "0", 0)
	}
	created := mustRevision(t, st)
	if created != start+counters {
		t.Fatalf("Revision after creating %d counters = %d, want %d", counters, created, start+counters)
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards acked and perKey
		acked = map[int64]string{}
	)
	perKey := make([]int, counters)
	for w := range writers {
		wg.Go(func() {
			cache := map[string]storage.KeyValue{}
			for i := range increments {
				k := key((w*7 + i) % counters)
				kv, ok := cache[k]
				if !ok {
					var err error
					if kv, err = st.Get(ctx, k); err != nil {
						t.Errorf("Get(%q): %v", k, err)
						return
					}
				}
				for {
					n, err := strconv.Atoi(string(kv.Value))
					if err != nil {
						t.Errorf("counter %q holds %q", k, kv.Value)
						return
					}
					next, err := st.Put(ctx, k, []byte(strconv.Itoa(n+1)), kv.ModRevision)
					var ce *storage.ConflictError
					if errors.As(err, &ce) && ce.Current != nil {
						kv = *ce.Current // retry without another read
						continue
					}
					if err != nil {
						t.Errorf("Put(%q, expected=%d): %v", k, kv.ModRevision, err)
						return
					}
					if rev, err := st.Revision(ctx); err != nil || rev < next.ModRevision {
						t.Errorf("Revision() = %d, %v right after a write acknowledged at %d", rev, err, next.ModRevision)
					}
					mu.Lock()
					if prev, dup := acked[next.ModRevision]; dup {
						t.Errorf("revision %d acknowledged twice, for %q and %q", next.ModRevision, prev, k)
					}
					acked[next.ModRevision] = k
					perKey[(w*7+i)%counters]++
					mu.Unlock()
					cache[k] = next
					break
				}
			}
		})
	}

	// A lister checks snapshot consistency while the writers run.
	listDone := make(chan struct{})
	var lister sync.WaitGroup
	lister.Go(func() {
		for {
			select {
			case <-listDone:
				return
			default:
			}
			res, err := st.List(ctx, prefix)
			if err != nil {
				t.Errorf("List: %v", err)
				return
			}
			sum := 0
			for _, kv := range res.KVs {
				n, _ := strconv.Atoi(string(kv.Value))
				sum += n
				if kv.ModRevision > res.Revision {
					t.Errorf("List at %d holds %q at ModRevision %d", res.Revision, kv.Key, kv.ModRevision)
				}
			}
			if len(res.KVs) != counters || int64(sum) != res.Revision-created {
				t.Errorf("List at revision %d: %d counters summing to %d, want %d summing to %d",
					res.Revision, len(res.KVs), sum, counters, res.Revision-created)
				return
			}
		}
	})
	wg.Wait()
	close(listDone)
	lister.Wait()
	if t.Failed() {
		return
	}

	final := mustRevision(t, st)
	if want := created + writers*increments; final != want {
		t.Errorf("final revision %d, want %d (one per acknowledged increment)", final, want)
	}
	total := 0
	for i := range counters {
		kv := mustGet(t, st, key(i))
		n, _ := strconv.Atoi(string(kv.Value))
		total += n
		if n != perKey[i] {
			t.Errorf("counter %d = %d, want %d acknowledged increments", i, n, perKey[i])
		}
	}
	if total != writers*increments {
		t.Errorf("counters sum to %d, want %d", total, writers*increments)
	}

	// The watcher of all counters saw every revision exactly once (the
	// reader checks contiguity), each value one above the previous.
	last := map[string]int{}
	for _, ev := range all.until(final) {
		n, _ := strconv.Atoi(string(ev.KV.Value))
		prev, seen := last[ev.KV.Key]
		switch {
		case ev.Type != storage.EventPut:
			t.Errorf("unexpected %v event for %q at %d", ev.Type, ev.KV.Key, ev.Revision)
		case !seen && (n != 0 || ev.KV.CreateRevision != ev.Revision):
			t.Errorf("first event of %q: value %q created at %d; want the creation of 0 at %d", ev.KV.Key, ev.KV.Value, ev.KV.CreateRevision, ev.Revision)
		case seen && n != prev+1:
			t.Errorf("event of %q at %d: value %q, want %d after %d", ev.KV.Key, ev.Revision, ev.KV.Value, prev+1, prev)
		case seen && acked[ev.Revision] != ev.KV.Key:
			t.Errorf("event of %q at %d was acknowledged for %q", ev.KV.Key, ev.Revision, acked[ev.Revision])
		}
		last[ev.KV.Key] = n
	}
	if all.last != final {
		t.Errorf("watch of all counters ended its events at %d, want %d", all.last, final)
	}

	got := len(one.until(final))
	if want := perKey[3] + 1; got != want {
		t.Errorf("watch of one counter saw %d events, want %d (creation and increments)", got, want)
	}
}
