package lock

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
)

// ElectConfig is what Elect needs.
type ElectConfig struct {
	Election
	// Observe watches the lease (list and watch) instead of campaigning.
	Observe bool
	// Out gets one line each time the leader changes: its identity, or
	// with JSON an Event.
	Out  io.Writer
	JSON bool
}

// Event is a line of Elect's JSON output.
type Event struct {
	Time  time.Time `json:"time"`
	Lease string    `json:"lease"`
	// Leader is the holder identity; "" when the lease has none, or when
	// this campaign stopped leading and does not yet know who leads.
	Leader string `json:"leader"`
	// Leading says whether this process leads; absent when observing.
	Leading *bool `json:"leading,omitempty"`
}

// Elect campaigns for the lease with client-go's LeaderElector, or only
// watches it, and prints the leader every time it changes, until ctx ends
// (exit code 0; a campaign releases the lease first). A campaign that stops
// leading (no renewal for the renew deadline, or another holder) prints an
// empty leader and campaigns again. The first line is the first leader
// seen; a lease without a holder prints nothing until it has one.
func Elect(ctx context.Context, cfg ElectConfig) (int, error) {
	if err := cfg.validate(!cfg.Observe); err != nil {
		return ExitFailed, err
	}
	cfg.Logger = cfg.Logger.With("lease", cfg.Lease())
	if err := cfg.reach(ctx, cfg.Observe); err != nil {
		if Refused(err) {
			needs := needsToCampaign
			if cfg.Observe {
				needs = "list and watch on leases.coordination.k8s.io"
			}
			return ExitRefused, RefusedError(err, needs, cfg.Namespace)
		}
		return ExitUnreachable, fmt.Errorf("could not reach the server: %w", err)
	}
	p := &printer{cfg: &cfg}
	if cfg.Observe {
		return observe(ctx, &cfg, p)
	}
	return campaign(ctx, &cfg, p)
}

func campaign(ctx context.Context, cfg *ElectConfig, p *printer) (int, error) {
	changed := make(chan struct{}, 1) // fencedLock's policy: a pending value means "look again"
	high := 0
	for {
		fl := newFencedLock(cfg.leaseLock(), cfg.Logger, high, changed)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            fl,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Lease(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return ExitFailed, err
		}
		runCtx, stop := context.WithCancel(cfg.electorContext(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			le.Run(runCtx)
		}()
	campaigning:
		for {
			select {
			case <-changed:
				if err := p.print(fl.state().holder); err != nil {
					stop()
					<-done
					return ExitFailed, err
				}
			case err := <-fl.fatal:
				stop()
				<-done
				return fatalCode(err, cfg.Namespace)
			case <-done:
				break campaigning
			}
		}
		stop()
		st := fl.state()
		if ctx.Err() != nil {
			if st.acquired {
				cfg.Logger.Info("stopped leading", "reason", fmt.Sprintf("interrupted: %v", context.Cause(ctx)))
			}
			// Released (or not, if that failed): say so.
			return 0, p.print(st.holder)
		}
		cfg.Logger.Warn("stopped leading; campaigning again", "reason", stoppedReason(st, cfg.RenewDeadline))
		if err := p.print(""); err != nil {
			return ExitFailed, err
		}
		high = st.high
	}
}

// stoppedReason says why a campaign's elector stopped leading: what
// fencedLock saw (another holder, no lease), or else client-go's reason:
// no renewal succeeded for the renew deadline (the server down or
// unreachable, or refusing), with the last error.
func stoppedReason(st state, renewDeadline time.Duration) string {
	if st.lostReason != "" {
		return st.lostReason
	}
	reason := fmt.Sprintf("no renewal succeeded for the renew deadline (%v)", renewDeadline)
	if st.lastErr != nil {
		reason += "; last error: " + st.lastErr.Error()
	}
	return reason
}

func observe(ctx context.Context, cfg *ElectConfig, p *printer) (int, error) {
	leases := cfg.Leases.Leases(cfg.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", cfg.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return leases.Watch(ctx, o)
		},
	}
	var printErr error
	show := func(obj any) {
		holder := ""
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if err := p.print(holder); err != nil && printErr == nil {
			printErr = err
		}
	}
	logger := clientGoLogger(cfg.Logger)
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &logger,
		ListerWatcher: lw,
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    show,
			UpdateFunc: func(_, obj any) { show(obj) },
			DeleteFunc: func(any) { show(nil) },
		},
	})
	// The handlers run on the informer's one goroutine, which ends before
	// RunWithContext returns.
	informer.RunWithContext(ctx)
	if printErr != nil {
		return ExitFailed, printErr
	}
	return 0, nil
}

// printer writes a line per change of leader. It is used from one
// goroutine at a time.
type printer struct {
	cfg *ElectConfig
	// last is the leader of the last line; at first "", so that nothing
	// is printed before there is a leader.
	last string
}

func (p *printer) print(leader string) error {
	if leader == p.last {
		return nil
	}
	p.last = leader
	if !p.cfg.JSON {
		_, err := fmt.Fprintln(p.cfg.Out, leader)
		return err
	}
	ev := Event{Time: time.Now().UTC(), Lease: p.cfg.Lease(), Leader: leader}
	if !p.cfg.Observe {
		leading := leader != "" && leader == p.cfg.Identity
		ev.Leading = &leading
	}
	return json.NewEncoder(p.cfg.Out).Encode(ev)
}
