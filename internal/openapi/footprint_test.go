package openapi_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/openapi"
)

// TestNewFootprint logs what New and Build cost: wall time, bytes
// allocated while building, and the heap the Service keeps (definitions;
// then the documents and their serialised forms). The full generated
// definitions are garbage once each returns.
func TestNewFootprint(t *testing.T) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	step := func(name string, fn func()) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		allocatedBefore := m.TotalAlloc
		start := time.Now()
		fn()
		elapsed := time.Since(start)
		runtime.ReadMemStats(&m)
		allocated := m.TotalAlloc - allocatedBefore
		runtime.GC()
		runtime.ReadMemStats(&m)
		retained := int64(m.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%s: %v, %.1f MiB allocated, %.1f MiB retained since New began", name, elapsed, float64(allocated)/(1<<20), float64(retained)/(1<<20))
		if retained > 64<<20 {
			t.Errorf("%s retains %d bytes", name, retained)
		}
	}
	var s *openapi.Service
	step("New", func() {
		var err error
		if s, err = openapi.New(served()); err != nil {
			t.Fatal(err)
		}
	})
	step("Build", func() {
		if err := s.Build(); err != nil {
			t.Fatal(err)
		}
	})
	runtime.KeepAlive(s)
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newService(b)
	}
}
