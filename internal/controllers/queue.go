package controllers

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Queue holds the keys of objects a controller is to look at, each with
// when it falls due, as client-go's delaying workqueue does; a key is
// held once, at its earliest time.
type Queue[K comparable] struct {
	mu sync.Mutex // guards at
	at map[K]time.Time
	// failures counts each key's failures since it last succeeded.
	failures map[K]int
	// wake has room for one wake-up: a full channel already holds one,
	// which covers any number of adds.
	wake chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue[K comparable]() *Queue[K] {
	return &Queue[K]{at: map[K]time.Time{}, failures: map[K]int{}, wake: make(chan struct{}, 1)}
}

// Add queues k for at, or keeps it for earlier if it already is.
func (q *Queue[K]) Add(k K, at time.Time) {
	q.mu.Lock()
	if cur, ok := q.at[k]; !ok || at.Before(cur) {
		q.at[k] = at
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Due takes the keys due at now, and returns when the next of the others
// is (zero: none).
func (q *Queue[K]) Due(now time.Time) (ready []K, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, at := range q.at {
		if !at.After(now) {
			ready = append(ready, k)
			delete(q.at, k)
		} else {
			next = earliest(next, at)
		}
	}
	return ready, next
}

// Wait returns once a key is added, at the latest after d (d < 0: no
// bound), or with ctx's error when ctx ends.
func (q *Queue[K]) Wait(ctx context.Context, d time.Duration) error {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-q.wake:
	case <-timeout:
	}
	return nil
}

// Len is the number of keys queued.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.at)
}

// earliest returns the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Retry queues k again after a failure: first after the first failure,
// doubling with each one since Forget, up to max, as client-go's
// exponential failure rate limiter. It returns the delay.
func (q *Queue[K]) Retry(k K, now time.Time, first, max time.Duration) time.Duration {
	q.mu.Lock()
	n := q.failures[k]
	q.failures[k] = n + 1
	q.mu.Unlock()
	delay := max
	if n < 32 && first<<n < max && first<<n > 0 {
		delay = first << n
	}
	q.Add(k, now.Add(delay))
	return delay
}

// Forget ends k's count of failures.
func (q *Queue[K]) Forget(k K) {
	q.mu.Lock()
	delete(q.failures, k)
	q.mu.Unlock()
}

// Work calls do with each key as it falls due, up to workers at once,
// until ctx ends (then it returns ctx's error). Keys due together make a
// batch that ends before the next begins, so that no key is worked on
// twice at once.
func (q *Queue[K]) Work(ctx context.Context, now func() time.Time, workers int, do func(K)) error {
	for {
		ready, next := q.Due(now())
		if len(ready) > 0 {
			var g errgroup.Group
			g.SetLimit(workers)
			for _, k := range ready {
				g.Go(func() error { do(k); return nil })
			}
			_ = g.Wait()
			continue
		}
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = max(next.Sub(now()), 0)
		}
		if err := q.Wait(ctx, wait); err != nil {
			return err
		}
	}
}
