package multi

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/controllers/garbagecollector"
)

// TestGarbageCollectorReplicas: with three replicas on etcd, one runs
// the garbage collector. An owner deleted while no replica runs it (its
// replica was killed, the next not yet elected) still has its dependents
// collected by the next, which finds them in its first lists; a
// foreground deletion started through one replica is finished by the
// collector in another.
func TestGarbageCollectorReplicas(t *testing.T) {
	d, acts := deployWatched(t, garbagecollector.Name)
	createNamespaces(t, d, "gc")
	first := acts.waitRunning(t, -1)
	alive := d.others(first)
	c := d.clientFor(t, alive[0])
	owner := func(name string) metav1.OwnerReference {
		l := createLease(t, c, name, nil)
		yes := true
		return metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: l.Name, UID: l.UID, BlockOwnerDeletion: &yes}
	}
	early, late := owner("early"), owner("late")
	for i := range 20 {
		createLease(t, c, fmt.Sprintf("early-%d", i), []metav1.OwnerReference{early})
		createLease(t, c, fmt.Sprintf("late-%d", i), []metav1.OwnerReference{late})
	}
	// While the first runs it.
	deleteLease(t, c, "early", metav1.DeletePropagationBackground)
	waitLeasesGone(t, d.clientFor(t, alive[1]), "early-")

	d.replicas[first].Kill(t)
	deleteLease(t, c, "late", metav1.DeletePropagationBackground)
	next := acts.waitRunning(t, first)
	t.Logf("the collector runs in %s after %s was killed", d.replicas[next].Name(), d.replicas[first].Name())
	waitLeasesGone(t, d.clientFor(t, alive[1]), "late-")

	fg := owner("fg")
	for i := range 5 {
		createLease(t, d.clientFor(t, alive[1]), fmt.Sprintf("fg-%d", i), []metav1.OwnerReference{fg})
	}
	deleteLease(t, d.clientFor(t, alive[1]), "fg", metav1.DeletePropagationForeground)
	waitLeasesGone(t, c, "fg")
	acts.check(t, len(d.replicas))
}

func createLease(t testing.TB, c kubernetes.Interface, name string, owners []metav1.OwnerReference) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases("gc").Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func deleteLease(t testing.TB, c kubernetes.Interface, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	if err := c.CoordinationV1().Leases("gc").Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
}

// waitLeasesGone waits until no Lease in namespace gc has a name
// beginning with prefix.
func waitLeasesGone(t testing.TB, c kubernetes.Interface, prefix string) {
	t.Helper()
	waitUntil(t, time.Minute, "the leases "+prefix+"* to be collected", func() bool {
		l, err := c.CoordinationV1().Leases("gc").List(context.Background(), metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false
		}
		for _, it := range l.Items {
			if len(it.Name) >= len(prefix) && it.Name[:len(prefix)] == prefix {
				return false
			}
		}
		return true
	})
}
