// Package testregistry runs a registry of the built-in kinds on an
// embedded store in a test's temporary directory, for the tests of what
// uses a registry directly (controllers). The registry's own tests, inside
// its package, cannot import it.
package testregistry

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

// Options change the registry from the server's defaults.
type Options struct {
	// WatchWindow and MinWatchTimeout, when set, replace the registry's.
	WatchWindow     int
	MinWatchTimeout time.Duration
	// Wrap, when set, wraps the store: a test's way to make writes fail.
	Wrap func(storage.Interface) storage.Interface
}

// Start runs the registry until the test ends and returns it once its
// caches are ready.
func Start(t testing.TB, opts Options) *registry.Registry {
	t.Helper()
	store, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var st storage.Interface = store
	if opts.Wrap != nil {
		st = opts.Wrap(st)
	}
	kinds := builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true})
	reg, err := registry.New(registry.Config{
		Store: st, Kinds: kinds,
		WatchWindow: opts.WatchWindow, MinWatchTimeout: opts.MinWatchTimeout,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	<-reg.Ready()
	return reg
}
