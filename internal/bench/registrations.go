package bench

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Registrations makes the leases Fill created (lease-000000 on) into
// registrations of service "bench" (one endpoint each, 10.x.y.z:8080;
// leaseDurationSeconds 60),
// waits until the service's slices hold them all, and reports how long
// that took and the slices' count and summed generation: run it again
// after a renewal benchmark and the generations tell how many slice
// writes the renewals caused (none, when nothing expired).
func Registrations(ctx context.Context, e *Env, namespace string, leases, clients int) error {
	if err := checkFilled(ctx, e, namespace, leases); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(ctx, leases, clients, func(i int) error {
		// A minute's lease: alive through a benchmark's pauses.
		patch := fmt.Sprintf(`{"metadata":{"labels":{"leasehold.dev/service":"bench"},"annotations":{"leasehold.dev/addresses":"10.%d.%d.%d","leasehold.dev/ports":"http:8080"}},"spec":{"leaseDurationSeconds":60}}`,
			i/65536, i/256%256, i%256)
		_, err := c.CoordinationV1().Leases(namespace).Patch(ctx, fmt.Sprintf("lease-%06d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return err
	}
	patched := time.Since(start)
	for {
		list, err := c.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=bench"})
		if err != nil {
			return err
		}
		n, gens := 0, int64(0)
		for _, s := range list.Items {
			n += len(s.Endpoints)
			gens += s.Generation
		}
		if n >= leases {
			fmt.Fprintf(e.Out, "registrations: %d leases registered in %v; %d endpoints in %d slices %v after the first (summed generation %d)\n",
				leases, patched.Round(time.Millisecond), n, len(list.Items), time.Since(start).Round(time.Millisecond), gens)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
