package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/storage"
)

// readyCheckTimeout bounds one storage probe: kube-apiserver's
// --etcd-readycheck-timeout default, so that a load balancer's probe gets
// its 500 before giving up on its own.
const readyCheckTimeout = 2 * time.Second

// storageProbe answers whether the store is reachable, asking it at most
// once per half timeout, as kube-apiserver's etcd check does: the health
// endpoints are public, and each request must not become a storage read.
// Between probes callers get the last answer.
type storageProbe struct {
	store storage.Interface
	log   *slog.Logger

	mu   sync.Mutex
	last time.Time // when the latest probe started
	err  error     // its answer
	// spaceLast and spaceErr are the same for the space check.
	spaceLast time.Time
	spaceErr  error
}

func (p *storageProbe) check() error {
	p.mu.Lock()
	if time.Since(p.last) < readyCheckTimeout/2 {
		defer p.mu.Unlock()
		return p.err
	}
	p.last = time.Now()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), readyCheckTimeout)
	defer cancel()
	_, err := p.store.Revision(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil && p.err == nil:
		p.log.Warn("storage unreachable: /readyz fails until it is back", "err", err)
	case err == nil && p.err != nil:
		p.log.Info("storage reachable again")
	}
	p.err = err
	return err
}

// spaceCheck is the /readyz check "storage-space": it fails while the
// store refuses writes for lack of space (storage.ErrNoSpace), when the
// server still serves reads, watches and deletes, so /livez stays ok. The
// engines log when the condition starts and ends. Other failures to
// answer are the "storage" check's. Like check, it asks the store at most
// once per half readyCheckTimeout.
func (p *storageProbe) spaceCheck() httpserver.HealthCheck {
	return httpserver.HealthCheck{Name: "storage-space", Check: func(*http.Request) error { return p.space() }}
}

func (p *storageProbe) space() error {
	sr, ok := p.store.(storage.SpaceReporter)
	if !ok {
		return nil
	}
	p.mu.Lock()
	if time.Since(p.spaceLast) < readyCheckTimeout/2 {
		defer p.mu.Unlock()
		return p.spaceErr
	}
	p.spaceLast = time.Now()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), readyCheckTimeout)
	defer cancel()
	err := sr.NoSpace(ctx)
	if !errors.Is(err, storage.ErrNoSpace) {
		err = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spaceErr = err
	return err
}
