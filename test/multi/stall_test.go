package multi

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

// stallDetector measures when the test process itself did not run on
// time: a goroutine sleeps stallTick at a time and records every wake-up
// later than stallThreshold. Under -race on a loaded two-core machine the
// process can stall for seconds; client-go's timing promises assume it
// does not, so the election checks add the stalls they overlap.
type stallDetector struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards stalls
	stalls []stall
}

type stall struct{ start, end time.Time }

func startStallDetector() *stallDetector {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stallDetector{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(stallTick):
			}
			now := time.Now()
			if late := now.Sub(last) - stallTick; late > stallThreshold {
				s.mu.Lock()
				s.stalls = append(s.stalls, stall{start: last.Add(stallTick), end: now})
				s.mu.Unlock()
			}
			last = now
		}
	}()
	return s
}

func (s *stallDetector) stop() {
	s.cancel()
	<-s.done
}

// within returns how long the process stalled between from and to.
func (s *stallDetector) within(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, st := range s.stalls {
		a, b := st.start, st.end
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

// longest returns the longest stall.
func (s *stallDetector) longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, st := range s.stalls {
		d = max(d, st.end.Sub(st.start))
	}
	return d
}
