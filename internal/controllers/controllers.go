package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/leasehold/leasehold/internal/registry"
)

// Controller is one controller.
type Controller struct {
	// Name names the controller in logs and in its Lease.
	Name string
	// Singleton controllers act in one replica at a time.
	Singleton bool
	// Run acts until ctx ends; an error is logged and Run called again
	// after a pause.
	Run func(ctx context.Context) error
}

// Election times of singleton controllers: kube-controller-manager's
// defaults.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// retryAfterError is the pause after a controller's Run fails.
	retryAfterError = time.Second
)

// Runner runs controllers.
type Runner struct {
	reg *registry.Registry
	log *slog.Logger
	// elect says singleton controllers must be elected: several replicas
	// share the store.
	elect    bool
	identity string
}

// NewRunner returns a runner over reg. elect is true when several
// replicas may share the store (the etcd engine).
func NewRunner(reg *registry.Registry, log *slog.Logger, elect bool) *Runner {
	host, _ := os.Hostname()
	return &Runner{reg: reg, log: log, elect: elect, identity: host + "_" + uuid.NewString()}
}

// Run runs every controller until ctx ends.
func (r *Runner) Run(ctx context.Context, cs ...Controller) error {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.Singleton && r.elect {
				r.runElected(ctx, c)
			} else {
				r.runLoop(ctx, c)
			}
		}()
	}
	wg.Wait()
	return nil
}

// runLoop runs c until ctx ends, again after each failure.
func (r *Runner) runLoop(ctx context.Context, c Controller) {
	for ctx.Err() == nil {
		err := c.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("controller failed; restarting", "controller", c.Name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(retryAfterError):
		}
	}
}

// runElected campaigns for c's Lease until ctx ends, and runs c while it
// leads.
func (r *Runner) runElected(ctx context.Context, c Controller) {
	lock, err := newLock(r.reg, "leasehold-"+c.Name, r.identity)
	if err != nil {
		r.log.Error("controller cannot be elected; not running it", "controller", c.Name, "err", err)
		return
	}
	// client-go's elector logs through klog's logger in ctx: this one.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(r.log.Handler()))
	for ctx.Err() == nil {
		if err := r.campaign(ctx, lock, c); err != nil {
			r.log.Error("controller cannot be elected; not running it", "controller", c.Name, "err", err)
			return
		}
	}
}

// campaign runs one client-go elector for c, and c while it leads, until
// the elector loses the Lease or ctx ends. c stops before the elector
// releases the Lease (when ctx ends) and before campaign returns (when
// the Lease is lost), so that c never runs here while another replica
// may already run it: client-go cancels its OnStartedLeading context only
// after releasing.
func (r *Runner) campaign(ctx context.Context, lock resourcelock.Interface, c Controller) error {
	// The elector stops when stopElecting is called: at once when ctx
	// ends while c does not run, else once c has stopped.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var mu sync.Mutex // guards started
	started := false
	ran := make(chan struct{}) // closed when c stopped, once started
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Name:            c.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if ctx.Err() != nil {
					mu.Unlock()
					stopElecting()
					return
				}
				started = true
				mu.Unlock()
				defer close(ran)
				runCtx, cancel := context.WithCancel(lctx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				r.log.Info("controller elected; running it here", "controller", c.Name, "identity", r.identity)
				r.runLoop(runCtx, c)
				r.log.Info("controller no longer runs here", "controller", c.Name)
				stopElecting()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			if !started {
				stopElecting()
			}
			mu.Unlock()
		case <-done:
		}
	}()
	le.Run(electCtx)
	close(done)
	mu.Lock()
	wait := started
	mu.Unlock()
	if wait {
		<-ran
	}
	return nil
}
