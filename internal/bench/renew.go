package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Renew has each of clients hold leases/clients leases and renew them as
// fast as it can for duration, as leader-election holders do (an update
// carrying the last resourceVersion), and reports the renew rate and
// latency. The leases are the ones Fill creates. With several servers the
// clients are spread over them, and each server's share is reported too.
func Renew(ctx context.Context, e *Env, namespace string, leases, clients int, duration time.Duration) error {
	proc := StartSampling(e.PID)
	servers := max(len(e.Configs), 1)
	var mu sync.Mutex
	var all Latencies
	perServer := make([]Latencies, servers)
	var firstErr error
	var wg sync.WaitGroup
	end := time.Now().Add(duration)
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
				l := held[name]
				if l == nil {
					var err error
					if l, err = api.Get(ctx, name, metav1.GetOptions{}); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
				now := metav1.NowMicro()
				l.Spec.RenewTime = &now
				t := time.Now()
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
				held[name] = out
			}
		}()
	}
	wg.Wait()
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
		fmt.Fprintln(e.Out, proc.Report())
	}
	return nil
}
