package openapi_test

import (
	"runtime"
	"testing"
	"time"
)

// TestNewFootprint logs what New costs: wall time, bytes allocated while
// building, and the heap the Service keeps (documents, serialised forms
// and definitions). The full generated definitions are garbage once New
// returns.
func TestNewFootprint(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s := newService(t)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(s)
	t.Logf("New: %v, %.1f MiB allocated, %.1f MiB retained", elapsed, float64(allocated)/(1<<20), float64(retained)/(1<<20))
	if retained > 64<<20 {
		t.Errorf("New retains %d bytes", retained)
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newService(b)
	}
}
