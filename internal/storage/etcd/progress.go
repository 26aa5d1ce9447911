package etcd

import (
	"context"
	"sync"
	"time"
)

const (
	// progressPeriod is how long a watch may lag a revision written by this
	// engine before it is asked for progress, and how often requests repeat
	// while a watch lags (kube-apiserver's cacher progressRequestPeriod).
	progressPeriod = 100 * time.Millisecond
	// progressRequestTimeout bounds one RequestProgress call, which waits
	// while the client library reconnects the watch's stream.
	progressRequestTimeout = time.Second
	// streamingGrace: a watch that delivered something this recently is
	// streaming events, and the revisions it lags are most likely in
	// flight to it; it is asked only once it has been silent that long.
	// Under a steady write load (every consistent read raising the
	// target) this saves a progress request, and its notification, a
	// read.
	streamingGrace = 5 * time.Millisecond
)

// progress is the state of the progress requester: which watches run, and
// the revision they should all have reported (see the package
// documentation, "Progress").
type progress struct {
	// mu guards watches, target and urgent.
	mu      sync.Mutex
	watches map[*watch]struct{}
	// target is the highest revision that Revision returned or a write of
	// this engine produced.
	target int64
	// urgent says that Revision raised target since the requester last
	// looked: someone waits for it, so lagging watches are asked at once.
	urgent bool

	// wake (capacity 1) tells the requester to look again. A send that
	// finds it full is dropped: the pending wake covers it.
	wake chan struct{}
}

func (p *progress) init() {
	p.watches = make(map[*watch]struct{})
	p.wake = make(chan struct{}, 1)
}

// want asks that every watch report rev; urgent when a caller waits for it.
func (p *progress) want(rev int64, urgent bool) {
	p.mu.Lock()
	raised := rev > p.target
	if raised {
		p.target = rev
	}
	if urgent {
		p.urgent = true
	}
	p.mu.Unlock()
	if raised || urgent {
		p.poke()
	}
}

func (p *progress) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progress) add(w *watch) {
	p.mu.Lock()
	p.watches[w] = struct{}{}
	p.mu.Unlock()
}

func (p *progress) remove(w *watch) {
	p.mu.Lock()
	delete(p.watches, w)
	p.mu.Unlock()
}

// lagging returns the established watches to ask for progress: those
// that have not reported the target and are not blocked on their consumer.
// waiting says whether any watch has not reported the target, blocked ones
// included (a blocked watch is behind anyway and is asked once it has
// caught up). urgent says whether Revision raised the target since the last
// look, and is cleared.
func (p *progress) lagging(buf []*watch) (ask []*watch, target int64, waiting, urgent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	target = p.target
	urgent = p.urgent
	p.urgent = false
	for w := range p.watches {
		if !w.established.Load() || w.reported.Load() >= p.target {
			continue
		}
		waiting = true
		if !w.blocked.Load() {
			buf = append(buf, w)
		}
	}
	return buf, target, waiting, urgent
}

// runProgress asks lagging watches for progress until ctx ends: at once
// when the target is urgent, otherwise after progressPeriod, and again
// every progressPeriod while any watch still lags.
func (s *Store) runProgress(ctx context.Context) {
	p := &s.progress
	timer := time.NewTimer(progressPeriod)
	timer.Stop()
	var (
		timerOn bool
		timerAt time.Time
		buf     []*watch
	)
	for {
		due := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-p.wake:
		case <-timer.C:
			timerOn = false
			due = true
		}
		ask, target, waiting, urgent := p.lagging(buf[:0])
		if !waiting {
			if timerOn {
				timer.Stop()
				timerOn = false
			}
			continue
		}
		next := progressPeriod
		if urgent || due {
			now := time.Now()
			for _, w := range ask {
				// A burst of Revision calls that all return the same
				// revision asks once; the timer asks again if needed.
				if !due && w.askedFor >= target && now.Sub(w.askedAt) < progressPeriod {
					continue
				}
				if quiet := now.Sub(time.Unix(0, w.advanced.Load())); quiet < streamingGrace {
					next = min(next, streamingGrace-quiet)
					continue
				}
				w.requestProgress(ctx)
				w.askedFor, w.askedAt = target, now
			}
		}
		clear(ask) // do not keep ended watches alive in buf
		buf = ask
		if at := time.Now().Add(next); !timerOn || at.Before(timerAt) {
			timer.Reset(next)
			timerOn, timerAt = true, at
		}
	}
}
