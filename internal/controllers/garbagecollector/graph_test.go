package garbagecollector

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/lease"
)

var leases = lease.New(lease.Options{}).Storage()

func newLease(name string, finalizers []string, owners ...*coordinationv1.Lease) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Finalizers: finalizers}}
	for _, o := range owners {
		yes := true
		l.OwnerReferences = append(l.OwnerReferences, metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: o.Name, UID: o.UID, BlockOwnerDeletion: &yes})
	}
	return l
}

func sorted(uids []types.UID) []types.UID {
	slices.Sort(uids)
	return slices.Compact(uids)
}

// TestGraphObserve: which nodes an event asks to look at.
func TestGraphObserve(t *testing.T) {
	g := newGraph()
	owner := newLease("owner", nil)
	dep := newLease("dep", nil, owner)

	if got := g.observe(leases, owner, false); len(got) != 0 {
		t.Errorf("an owner with no dependents: %v", got)
	}
	if got := g.observe(leases, dep, false); !slices.Equal(got, []types.UID{dep.UID}) {
		t.Errorf("a new dependent: %v, want itself", got)
	}
	if got := g.observe(leases, dep, false); len(got) != 0 {
		t.Errorf("a dependent renewed: %v, want nothing", got)
	}
	if n, o := g.size(); n != 1 || o != 1 {
		t.Errorf("size %d nodes %d owners, want 1 1", n, o)
	}

	// A foreground deletion: the owner and its dependents.
	marked := owner.DeepCopy()
	marked.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	marked.Finalizers = []string{metav1.FinalizerDeleteDependents}
	if got := sorted(g.observe(leases, marked, false)); !slices.Equal(got, []types.UID{dep.UID, owner.UID}) {
		t.Errorf("owner marked foreground: %v", got)
	}
	// The dependent goes: the owner waiting for it is looked at.
	if got := sorted(g.observe(leases, dep, true)); !slices.Equal(got, []types.UID{owner.UID}) {
		t.Errorf("dependent of a waiting owner deleted: %v", got)
	}
	if n, o := g.size(); n != 1 || o != 0 {
		t.Errorf("size %d nodes %d owners, want 1 0", n, o)
	}

	// An owner deleted: its dependents.
	dep2 := newLease("dep2", nil, owner)
	g.observe(leases, dep2, false)
	if got := g.observe(leases, marked, true); !slices.Equal(got, []types.UID{dep2.UID}) {
		t.Errorf("owner deleted: %v", got)
	}
	// A dependent losing its references loses its node.
	free := dep2.DeepCopy()
	free.OwnerReferences = nil
	g.observe(leases, free, false)
	if n, o := g.size(); n != 0 || o != 0 {
		t.Errorf("size %d nodes %d owners, want 0 0", n, o)
	}
}

// BenchmarkGraphMemory reports what the collector keeps for 100,000
// owned Leases, beyond the objects themselves (which the registry's
// cache holds anyway): per 100 dependents an owner, and one owner each.
func BenchmarkGraphMemory(b *testing.B) {
	const n = 100_000
	for _, perOwner := range []int{1, 100} {
		b.Run(fmt.Sprintf("dependents-per-owner=%d", perOwner), func(b *testing.B) {
			objs := make([]resources.Object, 0, n+n/perOwner)
			var owner *coordinationv1.Lease
			for i := range n {
				if i%perOwner == 0 {
					owner = newLease(fmt.Sprintf("owner-%d", i), nil)
					objs = append(objs, owner)
				}
				objs = append(objs, newLease(fmt.Sprintf("dep-%d", i), nil, owner))
			}
			var heap uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				g := newGraph()
				for _, o := range objs {
					g.observe(leases, o, false)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(g)
			}
			b.ReportMetric(float64(heap)/(1<<20), "MiB/100k")
			b.ReportMetric(float64(heap)/n, "B/dependent")
		})
	}
}

// TestGraphManyDependents: an owner's dependents past the size where
// their set becomes a map, added and removed.
func TestGraphManyDependents(t *testing.T) {
	g := newGraph()
	owner := newLease("owner", nil)
	var deps []*coordinationv1.Lease
	for i := range 3 * setMax {
		d := newLease(fmt.Sprintf("dep-%d", i), nil, owner)
		deps = append(deps, d)
		g.observe(leases, d, false)
	}
	if got := g.observe(leases, owner, true); len(got) != len(deps) {
		t.Errorf("owner deleted: %d dependents to look at, want %d", len(got), len(deps))
	}
	for _, d := range deps {
		g.observe(leases, d, true)
	}
	if n, o := g.size(); n != 0 || o != 0 {
		t.Errorf("size %d nodes %d owners, want 0 0", n, o)
	}
}
