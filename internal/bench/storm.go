package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StormConfig configures Storm.
type StormConfig struct {
	// Namespace holds the leases Fill created; Leases of them are renewed,
	// each by its own holder every RenewInterval (client-go's retry
	// period), over Clients connections.
	Namespace     string
	Leases        int
	RenewInterval time.Duration
	Clients       int
	// EventNamespace receives EventsPerSecond events (0: no storm, the
	// baseline) from EventClients connections, each a new event as
	// client-go's tools/record creates them, with a reason of its own so
	// that no recorder would aggregate them.
	EventNamespace  string
	EventsPerSecond float64
	EventClients    int
	Duration        time.Duration
	// DataDir, when set, is the server's data directory, whose size on
	// disk is reported.
	DataDir string
	// WaitExpiry, when positive, waits after the storm, at most that long,
	// for the server to expire the events (--event-ttl), then reports the
	// sizes again, Settle after the last event went (the store compacts
	// what it deleted, the Go runtime returns memory, in their own time).
	WaitExpiry time.Duration
	Settle     time.Duration
}

// Storm measures lease renewals, paced as leader-election holders renew,
// while (or without) an event storm: the renew latency, the events'
// rate and latency, and the server's CPU, memory and store size before,
// after, and once the events have expired.
func Storm(ctx context.Context, e *Env, cfg StormConfig) error {
	if err := checkFilled(ctx, e, cfg.Namespace, cfg.Leases); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if cfg.EventsPerSecond > 0 {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.EventNamespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	e.reportStore(ctx, c, cfg, "before")
	proc := StartSampling(e.PIDs)
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	var renews, events, eventErrs atomic.Int64
	start := time.Now()
	prog := e.startProgress(func() string {
		el := time.Since(start)
		return fmt.Sprintf("storm: %v of %v, %d renews, %d events (%s)", el.Truncate(time.Second), cfg.Duration, renews.Load(), events.Load(), rate(events.Load(), el))
	})
	defer prog.Stop()
	var renewLat, eventLat Latencies
	var mu sync.Mutex // guards renewLat, eventLat and firstErr
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup

	clients := make([]kubernetes.Interface, cfg.Clients)
	for i := range clients {
		if clients[i], err = e.clientFor(i); err != nil {
			return err
		}
	}
	for i := range cfg.Leases {
		api := clients[i%len(clients)].CoordinationV1().Leases(cfg.Namespace)
		name := fmt.Sprintf("lease-%06d", i)
		wg.Go(func() {
			var lat Latencies
			defer func() {
				mu.Lock()
				renewLat = append(renewLat, lat...)
				mu.Unlock()
			}()
			// Holders start at random points of the interval, as
			// independent processes would.
			tick := time.NewTimer(time.Duration(rand.Int64N(int64(cfg.RenewInterval))))
			defer tick.Stop()
			var l *coordinationv1.Lease
			for {
				select {
				case <-rctx.Done():
					return
				case <-tick.C:
				}
				tick.Reset(cfg.RenewInterval)
				if l == nil {
					var err error
					if l, err = api.Get(rctx, name, metav1.GetOptions{}); err != nil {
						if rctx.Err() == nil {
							fail(err)
						}
						return
					}
				}
				now := metav1.NowMicro()
				l.Spec.RenewTime = &now
				t := time.Now()
				out, err := api.Update(rctx, l, metav1.UpdateOptions{})
				switch {
				case rctx.Err() != nil:
					return
				case apierrors.IsConflict(err):
					l = nil
					continue
				case err != nil:
					fail(err)
					return
				}
				lat = append(lat, time.Since(t))
				renews.Add(1)
				l = out
			}
		})
	}

	var offered, late atomic.Int64
	if cfg.EventsPerSecond > 0 {
		// The pacer hands out one token per event due; a token finding
		// a second's worth waiting is dropped, and counted as not sent.
		tokens := make(chan int64, int(cfg.EventsPerSecond)+1)
		wg.Go(func() {
			defer close(tokens)
			interval := time.Duration(float64(time.Second) / cfg.EventsPerSecond)
			next := time.Now()
			for n := int64(0); ; n++ {
				next = next.Add(interval)
				select {
				case <-rctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				offered.Add(1)
				select {
				case tokens <- n:
				default:
					late.Add(1)
				}
			}
		})
		for w := range cfg.EventClients {
			ec, err := e.clientFor(cfg.Clients + w)
			if err != nil {
				return err
			}
			api := ec.CoreV1().Events(cfg.EventNamespace)
			wg.Go(func() {
				var lat Latencies
				defer func() {
					mu.Lock()
					eventLat = append(eventLat, lat...)
					mu.Unlock()
				}()
				for n := range tokens {
					ev := stormEvent(cfg.EventNamespace, n)
					t := time.Now()
					_, err := api.Create(rctx, ev, metav1.CreateOptions{})
					if rctx.Err() != nil {
						return
					}
					if err != nil {
						eventErrs.Add(1)
						continue
					}
					lat = append(lat, time.Since(t))
					if events.Add(1)%1000 == 0 {
						proc.Sample()
					}
				}
			})
		}
	}
	wg.Wait()
	prog.Stop()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(e.Out, "storm: renew: %d holders every %v: %.0f renews/s; latency %s\n", cfg.Leases, cfg.RenewInterval, float64(len(renewLat))/el.Seconds(), renewLat)
	if cfg.EventsPerSecond > 0 {
		fmt.Fprintf(e.Out, "storm: events: %.0f/s offered, %.0f/s created, %d failed, %d not sent (a second's worth waiting); latency %s\n",
			float64(offered.Load())/el.Seconds(), float64(events.Load())/el.Seconds(), eventErrs.Load(), late.Load(), eventLat)
	} else {
		fmt.Fprintln(e.Out, "storm: no events (the baseline)")
	}
	if proc != nil {
		// Per renewal only without a storm: the events' CPU is not the
		// renewals'.
		ops := int64(len(renewLat))
		if cfg.EventsPerSecond > 0 {
			ops = 0
		}
		fmt.Fprintln(e.Out, proc.Report(ops, "renewal"))
	}
	e.reportStore(ctx, c, cfg, "after the storm")
	if cfg.WaitExpiry > 0 && cfg.EventsPerSecond > 0 {
		deadline := time.Now().Add(cfg.WaitExpiry)
		for countEvents(ctx, c, cfg.EventNamespace) > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.Settle):
		}
		e.reportStore(ctx, c, cfg, "after the expiry")
	}
	return nil
}

// stormEvent is the n-th event of a storm, shaped as tools/record makes
// them: named after the object and the time, about one of a thousand
// objects, with a reason of its own.
func stormEvent(namespace string, n int64) *corev1.Event {
	now := metav1.Now()
	obj := fmt.Sprintf("storm-%03d", n%1000)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj, time.Now().UnixNano()), Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: namespace, Name: obj},
		Reason:         fmt.Sprintf("Storm%d", n),
		Message:        fmt.Sprintf("event %d of a storm: a controller reporting what it did to an object, as controllers do", n),
		Source:         corev1.EventSource{Component: "leasehold-bench"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Type: corev1.EventTypeNormal,
	}
}

// countEvents returns how many events are in namespace (-1 on error),
// from a list of one.
func countEvents(ctx context.Context, c kubernetes.Interface, namespace string) int64 {
	l, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return -1
	}
	n := int64(len(l.Items))
	if l.RemainingItemCount != nil {
		n += *l.RemainingItemCount
	}
	return n
}

// reportStore prints the events in the storm's namespace and, when known,
// the server's RSS and data directory size.
func (e *Env) reportStore(ctx context.Context, c kubernetes.Interface, cfg StormConfig, when string) {
	line := fmt.Sprintf("store %s: %d events", when, countEvents(ctx, c, cfg.EventNamespace))
	if p := StartSampling(e.PIDs); p != nil {
		if rss, err := p.RSS(); err == nil {
			line += fmt.Sprintf(", server RSS %.1f MiB", float64(rss)/(1<<20))
		}
	}
	if cfg.DataDir != "" {
		if n, wal, err := dirSize(filepath.Join(cfg.DataDir, "data")); err == nil {
			line += fmt.Sprintf(", data on disk %.1f MiB (%.1f MiB of it write-ahead log, recycled files included)", float64(n)/(1<<20), float64(wal)/(1<<20))
		}
	}
	fmt.Fprintln(e.Out, line)
}

// dirSize is the total size of the files under dir, and of those the
// pebble write-ahead log files (*.log): the one being written and those
// kept for reuse, up to a few memtables' worth however much is stored.
func dirSize(dir string) (total, wal int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if strings.HasSuffix(path, ".log") {
				wal += info.Size()
			}
		}
		return nil
	})
	return total, wal, err
}
