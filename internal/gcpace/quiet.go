package gcpace

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// quietFree is the least free heap worth a collection to return.
const quietFree = 4 << 20

// ReturnWhenQuiet returns the heap's free pages to the operating system
// once ready is closed (what start-up built and dropped) and then after
// every interval without a collection, when at least quietFree is free.
// A raised GOGC lets up to the headroom of freed pages wait for the next
// collection, which a busy server reuses soon and a quiet one only holds;
// returning them costs one collection an interval, only while quiet. It
// returns when ctx ends.
func ReturnWhenQuiet(ctx context.Context, ready <-chan struct{}, interval time.Duration) {
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/memory/classes/heap/free:bytes"}}
	read := func() (cycles, free uint64, ok bool) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
			return 0, 0, false // not this runtime's metrics
		}
		return sample[0].Value.Uint64(), sample[1].Value.Uint64(), true
	}
	debug.FreeOSMemory()
	last, _, ok := read()
	if !ok {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cycles, free, _ := read()
		if cycles == last && free >= quietFree {
			debug.FreeOSMemory()
			cycles, _, _ = read()
		}
		last = cycles
	}
}
