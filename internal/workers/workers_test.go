package workers

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestRun: functions run, concurrently when they must, and a worker
// that finished one runs the next.
func TestRun(t *testing.T) {
	var p Pool
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		p.Run(func() { defer wg.Done(); <-release })
	}
	close(release) // ten at once: none waited for another
	wg.Wait()
	done := make(chan struct{})
	p.Run(func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a function did not run")
	}
}

// TestStop: closing stop ends the idle workers.
func TestStop(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	p := New(stop)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		p.Run(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	close(stop)
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the workers", runtime.NumGoroutine(), before)
		}
	}
}
