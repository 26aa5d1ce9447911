package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress intervals: a live line on a terminal is redrawn often; plain
// lines (a log file, CI) come rarely enough not to drown the results.
const (
	liveInterval  = 250 * time.Millisecond
	plainInterval = 10 * time.Second
)

// progress reports how a long scenario is going while it runs, on
// Env.Progress: a line redrawn in place when Env.Live (a terminal), else a
// plain line every plainInterval. Results go to Env.Out, untouched.
type progress struct {
	w        io.Writer
	live     bool
	interval time.Duration
	status   func() string

	stop chan struct{}
	done chan struct{}
	// once guards closing stop, so that Stop may be called more than once.
	once sync.Once
}

// startProgress starts reporting status() until Stop. With no
// Env.Progress it reports nothing.
func (e *Env) startProgress(status func() string) *progress {
	p := &progress{w: e.Progress, live: e.Live, interval: plainInterval, status: status,
		stop: make(chan struct{}), done: make(chan struct{})}
	if p.live {
		p.interval = liveInterval
	}
	if e.ProgressInterval > 0 {
		p.interval = e.ProgressInterval
	}
	if p.w == nil {
		close(p.done)
		return p
	}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			if p.live {
				fmt.Fprint(p.w, "\r\033[K") // clear the line for the results
			}
			return
		case <-t.C:
			if p.live {
				fmt.Fprint(p.w, "\r\033[K"+p.status())
			} else {
				fmt.Fprintln(p.w, p.status())
			}
		}
	}
}

// Stop ends the reports and waits until the last one is written.
func (p *progress) Stop() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

// rate formats n events over d as a per-second rate.
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "0/s"
	}
	return fmt.Sprintf("%.0f/s", float64(n)/d.Seconds())
}
