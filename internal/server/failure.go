package server

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
)

// failedShutdownTimeout bounds the shutdown after the store has failed:
// requests in flight get their answers (writes fail at once), watches
// end, and Run returns so that the process exits and its supervisor
// restarts it.
const failedShutdownTimeout = 2 * time.Second

// failingStore is an engine that can fail for good while running: the
// embedded one does after an I/O error (see its package documentation).
// Done is closed then, and Err says why.
type failingStore interface {
	Done() <-chan struct{}
	Err() error
}

// storeFailed returns a channel closed when store fails for good, nil
// (never ready) for engines that do not.
func storeFailed(store storage.Interface) <-chan struct{} {
	if f, ok := store.(failingStore); ok {
		return f.Done()
	}
	return nil
}

// storeFailure logs that the store failed and returns the error Run ends
// with. Nothing acknowledged is lost: the store fails before answering the
// write that met the fault, and a restart recovers every acknowledged
// write from the write-ahead log. Staying up would serve reads, but no
// write until a restart: exiting lets the supervisor restart at once.
func (s *Server) storeFailure() error {
	err := s.store.(failingStore).Err()
	s.log.Error("storage failed; stopping so that a restart recovers it from its write-ahead log "+
		"(run leasehold under a supervisor that restarts it, such as systemd with Restart=always)", "err", err)
	return fmt.Errorf("storage failed: %w", err)
}
