package electiontest

import (
	"context"
	"sync"
	"time"
)

const (
	// stallTick is how often the stall detector wakes up.
	stallTick = 10 * time.Millisecond
	// stallThreshold is the lateness above which a wake-up counts as a
	// stall of the test process.
	stallThreshold = 50 * time.Millisecond
)

// Stalls measures when the test process itself did not run on time (under
// -race on a loaded machine, for up to seconds): a goroutine sleeps
// stallTick at a time and records each wake-up later than
// stallThreshold. Bounds on client-go's timing assume the process runs,
// so checks add the stalls they overlap.
type Stalls struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards stalls
	stalls [][2]time.Time
}

// StartStalls starts measuring; Stop stops.
func StartStalls() *Stalls {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stalls{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		last := time.Now()
		tick := time.NewTicker(stallTick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			if late := now.Sub(last) - stallTick; late > stallThreshold {
				s.mu.Lock()
				s.stalls = append(s.stalls, [2]time.Time{last.Add(stallTick), now})
				s.mu.Unlock()
			}
			last = now
		}
	}()
	return s
}

// Stop stops measuring.
func (s *Stalls) Stop() {
	s.cancel()
	<-s.done
}

// Within returns how long the process stalled between from and to.
func (s *Stalls) Within(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, st := range s.stalls {
		a, b := st[0], st[1]
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

// Longest returns the longest stall.
func (s *Stalls) Longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, st := range s.stalls {
		d = max(d, st[1].Sub(st[0]))
	}
	return d
}
