package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

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
