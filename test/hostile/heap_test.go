package hostile_test

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// The test process holds the server and the attackers both; the
// attackers hold little (a frame buffer a connection), so what grows is
// the server's.
//
// The heap is measured as the live bytes the last GC marked
// (/gc/heap/live:bytes), not as HeapInuse: HeapInuse also counts garbage
// not yet collected, which GOGC lets reach the size of the live heap (tens
// of MiB here) on its own. A queue that grows without bound is live, and
// shows within a GC cycle; a flood allocates fast enough to run many.

// heapSampleInterval is how often the live heap is sampled.
const heapSampleInterval = 10 * time.Millisecond

// heapWatch samples the live heap from a baseline until stopped.
type heapWatch struct {
	base  uint64
	limit uint64
	over  func()
	stopc chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex // guards peak, inuse
	peak   uint64     // the highest live heap seen
	inuse  uint64     // the highest HeapInuse-like figure seen (objects, live or not)
	passed bool
}

// watchHeap collects garbage for a baseline, then samples the live heap
// every heapSampleInterval; once it grows past limit, it calls over (to
// stop the attack early) once.
func watchHeap(limit uint64, over func()) *heapWatch {
	runtime.GC()
	w := &heapWatch{base: liveHeap(), limit: limit, over: over, stopc: make(chan struct{})}
	w.wg.Go(func() {
		t := time.NewTicker(heapSampleInterval)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stopc:
				return
			case <-t.C:
			}
		}
	})
	return w
}

func (w *heapWatch) sample() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	live, objects := s[0].Value.Uint64(), s[1].Value.Uint64()
	w.mu.Lock()
	w.peak = max(w.peak, live)
	w.inuse = max(w.inuse, objects)
	fire := !w.passed && w.growth() > w.limit
	if fire {
		w.passed = true
	}
	w.mu.Unlock()
	if fire {
		w.over()
	}
}

// growth is the peak's growth over the baseline, w.mu held.
func (w *heapWatch) growth() uint64 { return max(w.peak, w.base) - w.base }

// stop ends the sampling; it reports the live heap's peak growth, the
// peak of heap objects (garbage included), and whether the limit was
// passed.
func (w *heapWatch) stop() (growth, objects uint64, passed bool) {
	close(w.stopc)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.growth(), w.inuse, w.passed
}

// heldNow collects garbage and returns the live heap's growth over the
// baseline: what the attack's connections still hold.
func (w *heapWatch) heldNow() uint64 {
	runtime.GC()
	return max(liveHeap(), w.base) - w.base
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
