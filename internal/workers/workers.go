// Package workers runs functions on goroutines that outlive them.
//
// A request's handler goes deep (the field manager, validation's
// reflection, the codecs), so a fresh goroutine's stack grew, and was
// copied, on most requests: a twentieth of a lease renewal's CPU. A
// worker that has run one function waits for the next instead, and
// keeps its stack until the garbage collector shrinks it.
package workers

import (
	"sync"
	"time"
)

// idleTimeout is how long a worker waits for a function before it ends.
const idleTimeout = 10 * time.Second

// Pool runs functions on its workers. The zero Pool is ready; its
// workers end only when idle.
type Pool struct {
	once sync.Once
	idle chan func()
	stop <-chan struct{}
}

// New returns a Pool whose idle workers also end once stop is closed.
func New(stop <-chan struct{}) *Pool {
	return &Pool{stop: stop}
}

// Run runs f on an idle worker, or on a new one if none is waiting.
func (p *Pool) Run(f func()) {
	p.once.Do(func() { p.idle = make(chan func()) })
	select {
	case p.idle <- f:
	default:
		go p.loop(f)
	}
}

func (p *Pool) loop(f func()) {
	t := time.NewTimer(idleTimeout)
	defer t.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		t.Reset(idleTimeout)
		select {
		case f = <-p.idle:
		case <-t.C:
			return
		case <-p.stop:
			return
		}
	}
}
