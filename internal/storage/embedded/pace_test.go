package embedded

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCommitPacing: after a commit of busyBatch writes or more, the next
// waits until as many are queued, or for CommitInterval; after a smaller
// one it does not wait; Close ends a wait and commits what was queued.
func TestCommitPacing(t *testing.T) {
	var (
		holdNext atomic.Bool
		entered  = make(chan struct{})
		release  = make(chan struct{})
		mu       sync.Mutex
		batches  []int
	)
	s, err := Open(t.TempDir(), Options{CommitInterval: time.Hour, OnCommit: func(c CommitStats) {
		mu.Lock()
		batches = append(batches, c.Writes)
		mu.Unlock()
		if holdNext.Swap(false) {
			entered <- struct{}{}
			<-release
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	put := func(ctx context.Context, key string) error {
		_, err := s.Put(ctx, "/registry/leases/ns/"+key, []byte("v"), 0)
		return err
	}
	waitQueued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(s.queue) < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d writes queued, want %d", len(s.queue), n)
			}
		}
	}
	// answered returns what ch yields, failing with what if nothing comes
	// within 10 s.
	answered := func(ch <-chan error, what string) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal(what)
			return nil
		}
	}
	wantLastBatch := func(n int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if last := batches[len(batches)-1]; last != n {
			t.Fatalf("the queued writes committed %d at once, want %d", last, n)
		}
	}

	// One writer at a time is never held, however long the interval: held,
	// these would time out.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		if err := put(ctx, fmt.Sprintf("alone-%d", i)); err != nil {
			t.Fatalf("write %d of a lone writer: %v", i, err)
		}
	}

	// commitTogether has n writes queue while the committer is held in the
	// commit of one, then commit together.
	commitTogether := func(n int) {
		t.Helper()
		holdNext.Store(true)
		errs := make(chan error, n+1)
		go func() { errs <- put(t.Context(), fmt.Sprintf("first-%d", n)) }()
		<-entered
		for i := range n {
			go func() { errs <- put(t.Context(), fmt.Sprintf("together-%d-%d", n, i)) }()
		}
		waitQueued(n)
		release <- struct{}{}
		for range n + 1 {
			if err := answered(errs, "writes held together were not committed"); err != nil {
				t.Fatal(err)
			}
		}
		wantLastBatch(n)
	}

	// After a commit of fewer than busyBatch, a write is not held.
	commitTogether(busyBatch - 1)
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := put(ctx, "after-a-few"); err != nil {
		t.Fatalf("a write after a commit of %d: %v", busyBatch-1, err)
	}

	commitTogether(busyBatch)
	// The next commit waits for busyBatch writes (the interval is an
	// hour): one write stays queued, ...
	late := make(chan error, busyBatch)
	stayQueued := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for still := 0; still < 100; {
			select {
			case err := <-late:
				t.Fatalf("a write right after a busy commit was answered (%v) before %d were queued", err, busyBatch)
			case <-time.After(time.Millisecond):
				switch {
				case len(s.queue) == 1:
					still++ // still there, a millisecond later
				case time.Now().After(deadline):
					t.Fatal("a write was never queued")
				}
			}
		}
	}
	go func() { late <- put(t.Context(), "late-0") }()
	stayQueued()
	// ... until busyBatch are: they commit together, without waiting
	// for the interval.
	for i := 1; i < busyBatch; i++ {
		go func() { late <- put(t.Context(), fmt.Sprintf("late-%d", i)) }()
	}
	for range busyBatch {
		if err := answered(late, fmt.Sprintf("%d writes queued after a busy commit of %d were not committed", busyBatch, busyBatch)); err != nil {
			t.Fatal(err)
		}
	}
	wantLastBatch(busyBatch)

	// Close ends a wait, and the queued write is committed.
	go func() { late <- put(t.Context(), "last") }()
	stayQueued()
	closed = true
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	if err := answered(done, "Close did not end the committer's wait"); err != nil {
		t.Fatal(err)
	}
	if err := answered(late, "the write queued before Close was not answered"); err != nil {
		t.Fatalf("the write queued before Close: %v, want committed", err)
	}
}
