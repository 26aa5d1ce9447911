// Package gcpace spaces out garbage collections while the heap is small.
//
// With GOGC=100 the heap may grow by its live size before the next
// collection, so a server with a small live heap and a high allocation
// rate (tens of thousands of small requests a second over a few thousand
// objects) collects several times a second, and each collection costs
// about the same whatever the live heap. Letting the heap grow by at least
// a fixed amount instead (as if GOGC were raised while the heap is small)
// buys most of that CPU back for a bounded amount of memory; once the live
// heap is larger than that amount, GOGC=100 applies unchanged. The soft
// memory limit (GOMEMLIMIT) still has the last word.
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GOGC set for a tiny live heap.
const maxPercent = 10000

// liveHeap is the runtime's metric for the heap marked live by the last
// collection.
const liveHeap = "/gc/heap/live:bytes"

// Pacer adjusts GOGC after every collection; Start makes one.
type Pacer struct {
	headroom int64
	mu       sync.Mutex
	stopped  bool
	percent  int // the GOGC last set
	sample   []metrics.Sample
}

// Start lets the heap grow by at least headroom bytes between
// collections, until stop is called (which restores GOGC=100). It does
// nothing, and says so with ok=false, when the GOGC environment variable
// is set: an explicit choice is the user's.
func Start(headroom int64) (p *Pacer, ok bool) {
	p = &Pacer{headroom: headroom, percent: 100, sample: []metrics.Sample{{Name: liveHeap}}}
	if os.Getenv("GOGC") != "" || headroom <= 0 {
		p.stopped = true
		return p, false
	}
	p.adjust()
	p.arm()
	return p, true
}

// Stop ends the adjustments and restores GOGC=100.
func (p *Pacer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	debug.SetGCPercent(100)
	p.percent = 100
}

// Percent is the GOGC the pacer set last.
func (p *Pacer) Percent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.percent
}

// sentinel is garbage as soon as it is made, so its cleanup runs after
// the next collection. It holds a pointer so that it is not a tiny
// allocation, whose cleanups may never run.
type sentinel struct{ _ *int }

// arm has p adjusted after the next collection.
func (p *Pacer) arm() {
	runtime.AddCleanup(&sentinel{}, func(p *Pacer) {
		if p.adjust() {
			p.arm()
		}
	}, p)
}

// adjust sets GOGC for the live heap of the last collection and reports
// whether p is still running.
func (p *Pacer) adjust() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	metrics.Read(p.sample)
	if p.sample[0].Value.Kind() != metrics.KindUint64 {
		return false // not this runtime's metric: leave GOGC alone
	}
	percent := Percent(int64(p.sample[0].Value.Uint64()), p.headroom)
	// A change of a few percent is not worth the runtime's bookkeeping.
	if percent*20 < p.percent*19 || percent*20 > p.percent*21 {
		debug.SetGCPercent(percent)
		p.percent = percent
	}
	return true
}

// Percent is the GOGC that lets a heap of live bytes grow by headroom
// bytes, never below 100.
func Percent(live, headroom int64) int {
	if live <= 0 || headroom <= live {
		return 100
	}
	return int(min(headroom*100/live, maxPercent))
}
