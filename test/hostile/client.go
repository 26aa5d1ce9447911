package hostile

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// renewTimeout bounds one renewal of the well-behaved client: one that
// takes longer is an error, not a slow success.
const renewTimeout = 10 * time.Second

// ClientResult is what a well-behaved client saw.
type ClientResult struct {
	// Requests counts the renewals tried; Errors those that failed, the
	// first of which is FirstError.
	Requests, Errors int
	FirstError       error
	// Latencies are the successful renewals' durations.
	Latencies []time.Duration
}

// Quantile is the q-quantile (0 to 1) of the latencies, 0 when none.
func (r ClientResult) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func (r ClientResult) String() string {
	s := fmt.Sprintf("%d renewals, %d errors, p50 %v, p99 %v", r.Requests, r.Errors,
		round(r.Quantile(0.5)), round(r.Quantile(0.99)))
	if r.FirstError != nil {
		s += fmt.Sprintf(" (first error: %v)", r.FirstError)
	}
	return s
}

// Renew is a well-behaved client: a leader renewing its lease name
// (created when absent), once every interval until ctx ends, each
// renewal one update of the lease it last read, as client-go's leader
// election does. A conflict re-reads the lease.
func Renew(ctx context.Context, leases coordinationv1client.LeaseInterface, name string, interval time.Duration) ClientResult {
	var r ClientResult
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder := "hostile-well-behaved"
		lease, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		r.Errors, r.FirstError = 1, err
		return r
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return r
		case <-tick.C:
		}
		now := metav1.NowMicro()
		lease.Spec.RenewTime = &now
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), renewTimeout)
		start := time.Now()
		updated, err := leases.Update(rctx, lease, metav1.UpdateOptions{})
		took := time.Since(start)
		if apierrors.IsConflict(err) {
			updated, err = leases.Get(rctx, name, metav1.GetOptions{})
		}
		cancel()
		r.Requests++
		if err != nil {
			r.Errors++
			if r.FirstError == nil {
				r.FirstError = err
			}
			continue
		}
		lease = updated
		r.Latencies = append(r.Latencies, took)
	}
}
