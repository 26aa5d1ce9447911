package bench

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// GCConfig describes the garbage collection scenario.
type GCConfig struct {
	Namespace string
	// Dependents Leases are created, PerOwner of them owned by each owner
	// Lease, by Clients clients.
	Dependents, PerOwner, Clients int
}

// GC measures what the garbage collector costs a server: it creates
// owner Leases (gc-owner-NNNNNN) and Dependents Leases owned by them
// (gc-dep-NNNNNN), reports what the server's heap grew by per dependent
// (the object, its cache entry and the collector's node), then deletes
// the owners in the background and reports how long until the collector
// had deleted every dependent.
func GC(ctx context.Context, e *Env, gc GCConfig) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gc.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	leases := c.CoordinationV1().Leases(gc.Namespace)
	owners := (gc.Dependents + gc.PerOwner - 1) / gc.PerOwner
	uids := make([]metav1.OwnerReference, owners)
	err = parallel(ctx, owners, gc.Clients, func(i int) error {
		l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gc-owner-%06d", i)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		yes := true
		uids[i] = metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: l.Name, UID: l.UID, BlockOwnerDeletion: &yes}
		return nil
	})
	if err != nil {
		return fmt.Errorf("creating owners: %w", err)
	}
	time.Sleep(2 * time.Second)
	heapBefore, err := heapInUse(ctx, c)
	if err != nil {
		return err
	}
	rssBefore := e.rss()
	start := time.Now()
	err = parallel(ctx, gc.Dependents, gc.Clients, func(i int) error {
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("gc-dep-%06d", i), OwnerReferences: []metav1.OwnerReference{uids[i/gc.PerOwner]},
		}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("creating dependents: %w", err)
	}
	fmt.Fprintf(e.Out, "gc: %d dependents of %d owners created in %v\n", gc.Dependents, owners, time.Since(start).Round(time.Millisecond))
	// Let the writes' garbage go before reading the heap.
	time.Sleep(5 * time.Second)
	heapAfter, err := heapInUse(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "gc: server heap in use %.1f -> %.1f MiB: %.2f KiB per dependent (object, caches, collector)",
		float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), float64(heapAfter-heapBefore)/1024/float64(gc.Dependents))
	if rssBefore > 0 {
		fmt.Fprintf(e.Out, "; RSS %.1f -> %.1f MiB", float64(rssBefore)/(1<<20), float64(e.rss())/(1<<20))
	}
	fmt.Fprintln(e.Out)

	proc := StartSampling(e.PIDs)
	start = time.Now()
	background := metav1.DeletePropagationBackground
	err = parallel(ctx, owners, gc.Clients, func(i int) error {
		return leases.Delete(ctx, fmt.Sprintf("gc-owner-%06d", i), metav1.DeleteOptions{PropagationPolicy: &background})
	})
	if err != nil {
		return fmt.Errorf("deleting owners: %w", err)
	}
	for {
		n, err := count(ctx, c, gc.Namespace)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	el := time.Since(start)
	fmt.Fprintf(e.Out, "gc: owners deleted; every dependent collected %v after the first delete (%s)\n", el.Round(time.Millisecond), rate(int64(gc.Dependents), el))
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(gc.Dependents), "collected dependent"))
	}
	return nil
}

// count returns the number of Leases left in namespace.
func count(ctx context.Context, c kubernetes.Interface, namespace string) (int64, error) {
	l, err := c.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	n := int64(len(l.Items))
	if l.RemainingItemCount != nil {
		n += *l.RemainingItemCount
	}
	return n, nil
}
