package httpserver

import "time"

// workers runs handlers on goroutines that outlive them. A handler runs
// on a goroutine of its own (withTimeout) and its calls go deep (the
// field manager, validation's reflection), so a fresh goroutine's stack
// grew, and was copied, on most requests: a twentieth of a lease
// renewal's CPU. An idle worker waits for the next handler instead and
// keeps its stack until the garbage collector shrinks it.
type workers struct {
	idle chan func()
	stop <-chan struct{}
}

// workerIdle is how long a worker waits for a handler before it ends.
const workerIdle = 10 * time.Second

func newWorkers(stop <-chan struct{}) *workers {
	return &workers{idle: make(chan func()), stop: stop}
}

// run runs f on an idle worker, or on a new one if none is waiting.
func (w *workers) run(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		t.Reset(workerIdle)
		select {
		case f = <-w.idle:
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}
