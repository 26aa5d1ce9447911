package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fill creates n leader-election-shaped leases named lease-NNNNNN in
// namespace with the given number of clients, skipping ones that exist,
// and reports the rate and, with a pid, the server's RSS afterwards.
func Fill(ctx context.Context, e *Env, namespace string, n, clients int) error {
	proc := StartSampling(e.PIDs)
	start := time.Now()
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	prog := e.startProgress(func() string {
		return fmt.Sprintf("fill: %d of %d leases, %s", done.Load(), n, rate(done.Load(), time.Since(start)))
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
			leases := c.CoordinationV1().Leases(namespace)
			for i := w; i < n && ctx.Err() == nil; i += clients {
				now := metav1.NowMicro()
				l := &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lease-%06d", i), Labels: map[string]string{"app": "bench"}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(fmt.Sprintf("holder-%06d", i)), LeaseDurationSeconds: ptr[int32](15),
						AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr[int32](0)},
				}
				if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if done.Add(1)%10000 == 0 {
					proc.Sample()
				}
			}
		}()
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
	fmt.Fprintf(e.Out, "fill: %d leases in %v with %d clients (%.0f creates/s)\n", n, el.Round(time.Millisecond), clients, float64(n)/el.Seconds())
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(n), "create"))
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
