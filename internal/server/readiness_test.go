package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// countingStore answers Revision with err and counts the calls.
type countingStore struct {
	storage.Interface
	calls atomic.Int32
	err   atomic.Value
}

func (s *countingStore) Revision(context.Context) (int64, error) {
	s.calls.Add(1)
	err, _ := s.err.Load().(error)
	return 1, err
}

// TestStorageProbe: however often /readyz is asked, the store is asked at
// most once per half timeout, and the answer in between is the last one.
func TestStorageProbe(t *testing.T) {
	st := &countingStore{}
	p := &storageProbe{store: st, log: slog.New(slog.DiscardHandler)}
	for range 100 {
		if err := p.check(); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("100 checks asked the store %d times, want 1", n)
	}
	down := errors.New("unreachable")
	st.err.Store(down)
	if err := p.check(); err != nil {
		t.Errorf("within the interval: %v, want the last answer (nil)", err)
	}
	time.Sleep(readyCheckTimeout/2 + 100*time.Millisecond)
	if err := p.check(); !errors.Is(err, down) || st.calls.Load() != 2 {
		t.Errorf("after the interval: %v after %d calls, want the store's error from a second call", err, st.calls.Load())
	}
	if err := p.check(); !errors.Is(err, down) {
		t.Errorf("within the next interval: %v, want the last answer", err)
	}
}
