package gcpace

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom int64
		want           int
	}{
		{0, 64 << 20, 100},
		{64 << 20, 64 << 20, 100},
		{200 << 20, 64 << 20, 100},
		{32 << 20, 64 << 20, 200},
		{10 << 20, 64 << 20, 640},
		{1, 64 << 20, maxPercent},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// TestPacer has the pacer follow a live heap that grows past the headroom
// and shrinks again, collection after collection.
func TestPacer(t *testing.T) {
	t.Setenv("GOGC", "")
	const headroom = 256 << 20
	p, ok := Start(headroom)
	if !ok {
		t.Fatal("Start refused with GOGC unset")
	}
	defer p.Stop()

	// settle collects until the pacer has seen a collection's result.
	settle := func(want func(int) bool) int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
			if got := p.Percent(); want(got) || time.Now().After(deadline) {
				return got
			}
		}
	}
	if got := settle(func(n int) bool { return n > 300 }); got <= 300 {
		t.Fatalf("GOGC with a small live heap = %d, want well above 100", got)
	}
	if got := debug.SetGCPercent(-1); got != p.Percent() {
		t.Errorf("the runtime's GOGC = %d, the pacer's %d", got, p.Percent())
	}
	debug.SetGCPercent(p.Percent())

	big := make([][]byte, 0, 400)
	for range 400 { // 400 MiB, more than the headroom
		b := make([]byte, 1<<20)
		b[0] = 1
		big = append(big, b)
	}
	if got := settle(func(n int) bool { return n == 100 }); got != 100 {
		t.Errorf("GOGC with a live heap above the headroom = %d, want 100", got)
	}
	runtime.KeepAlive(big) // and no longer live
	if got := settle(func(n int) bool { return n > 300 }); got <= 300 {
		t.Errorf("GOGC once the heap is small again = %d, want well above 100", got)
	}

	p.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after Stop = %d, want 100", got)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after Stop and a collection = %d, want 100", got)
	}
}

func TestGOGCSet(t *testing.T) {
	t.Setenv("GOGC", "150")
	p, ok := Start(64 << 20)
	if ok {
		p.Stop()
		t.Fatal("Start adjusted GOGC although GOGC was set")
	}
	p.Stop() // harmless
}

// TestReturnWhenQuiet: freed heap that a raised GOGC would keep is
// returned once ready, and again after a quiet interval.
func TestReturnWhenQuiet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(maxPercent))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	released := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	garbage := func() {
		var keep [][]byte
		for range 48 {
			keep = append(keep, make([]byte, 1<<20))
		}
		runtime.KeepAlive(keep)
	}
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); ReturnWhenQuiet(ctx, ready, 50*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	for round, what := range []string{"once ready", "after a quiet interval"} {
		runtime.GC() // the garbage is freed by a collection; the pages stay
		garbage()
		runtime.GC()
		before := released()
		if round == 0 {
			close(ready)
		}
		deadline := time.Now().Add(10 * time.Second)
		for released()-before < 32<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d MiB returned to the OS, want at least 32", what, (released()-before)>>20)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
