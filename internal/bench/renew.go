package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Renew has each of clients hold leases/clients leases and renew them as
// fast as it can for duration, as leader-election holders do (an update
// carrying the last resourceVersion), and reports the renew rate and
// latency. The leases are the ones Fill creates: Renew does not create
// them (creating is Fill's measurement), and answers ErrNotFilled when the
// first or the last is missing. With several servers the clients are
// spread over them, and each server's share is reported too. With read,
// each renewal reads the lease first (a consistent GET) and then updates
// it, as client-go's leader election does: its latency is both.
func Renew(ctx context.Context, e *Env, namespace string, leases, clients int, duration time.Duration, read bool) error {
	if err := checkFilled(ctx, e, namespace, leases); err != nil {
		return err
	}
	proc := StartSampling(e.PIDs)
	servers := max(len(e.Configs), 1)
	var mu sync.Mutex
	var all Latencies
	perServer := make([]Latencies, servers)
	var firstErr error
	var wg sync.WaitGroup
	var renews atomic.Int64
	start := time.Now()
	end := start.Add(duration)
	prog := e.startProgress(func() string {
		el := time.Since(start)
		return fmt.Sprintf("renew: %v of %v, %d renews, %s", el.Truncate(time.Second), duration, renews.Load(), rate(renews.Load(), el))
	})
	defer prog.Stop()
	for w := range clients {
		c, err := e.clientFor(w)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := c.CoordinationV1().Leases(namespace)
			held := map[string]*coordinationv1.Lease{}
			var lat Latencies
			defer func() {
				mu.Lock()
				all = append(all, lat...)
				perServer[w%servers] = append(perServer[w%servers], lat...)
				mu.Unlock()
			}()
			for i := w; time.Now().Before(end) && ctx.Err() == nil; i += clients {
				if i >= leases {
					i = w
				}
				name := fmt.Sprintf("lease-%06d", i)
				t := time.Now()
				l := held[name]
				if l == nil || read {
					var err error
					if l, err = api.Get(ctx, name, metav1.GetOptions{}); err != nil {
						if apierrors.IsNotFound(err) {
							err = notFilled(namespace, leases, name)
						}
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
				now := metav1.NowMicro()
				l.Spec.RenewTime = &now
				if !read {
					t = time.Now()
				}
				out, err := api.Update(ctx, l, metav1.UpdateOptions{})
				switch {
				case apierrors.IsConflict(err):
					delete(held, name) // someone else renewed it: read it again
					continue
				case err != nil:
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t))
				renews.Add(1)
				held[name] = out
			}
		}()
	}
	wg.Wait()
	prog.Stop()
	if firstErr != nil {
		return firstErr
	}
	fmt.Fprintf(e.Out, "renew: %d clients over %d leases: %.0f renews/s; latency %s\n", clients, leases, float64(len(all))/duration.Seconds(), all)
	if servers > 1 {
		for i, lat := range perServer {
			fmt.Fprintf(e.Out, "renew: through %s (%d clients): %.0f renews/s; latency %s\n",
				e.Configs[i].Host, (clients+servers-1-i)/servers, float64(len(lat))/duration.Seconds(), lat)
		}
	}
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(len(all)), "renewal"))
	}
	return nil
}

// ErrNotFilled is the error of a scenario that needs the leases Fill
// creates when they are not there.
var ErrNotFilled = errors.New("the leases are not there")

// checkFilled makes sure the first and the last of the leases scenario
// Fill creates exist in namespace.
func checkFilled(ctx context.Context, e *Env, namespace string, leases int) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	for _, i := range []int{0, leases - 1} {
		name := fmt.Sprintf("lease-%06d", i)
		_, err := c.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return notFilled(namespace, leases, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func notFilled(namespace string, leases int, missing string) error {
	return fmt.Errorf("%w: lease %s/%s not found; create them first: leasehold bench fill --namespace %s --leases %d (and the same --kubeconfig)",
		ErrNotFilled, namespace, missing, namespace, leases)
}
