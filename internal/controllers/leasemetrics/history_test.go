package leasemetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/registry"
)

// historyOf returns the one history of ns/name, or fails.
func historyOf(t *testing.T, o *Observer, ns, name string) LeaseHistory {
	t.Helper()
	for _, h := range o.History(ns).Leases {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no history of %s/%s", ns, name)
	return LeaseHistory{}
}

func TestHistoryTenuresAndGaps(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	o := newObserver(Options{Now: c.Now})
	t0 := c.now
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	put := func(typ watch.EventType, holder string, renew time.Time, acquire time.Time) {
		l := newLease("a", "leader", holder, renew, 15)
		if !acquire.IsZero() {
			a := metav1.NewMicroTime(acquire)
			l.Spec.AcquireTime = &a
		}
		o.apply([]registry.Event{event(typ, l)})
	}
	put(watch.Added, "alice", at(0), at(-60))
	put(watch.Modified, "alice", at(10), at(-60)) // renewals
	put(watch.Modified, "alice", at(20), at(-60))
	put(watch.Modified, "bob", at(34), at(34)) // alice died after 20 s: a gap of 14 s
	put(watch.Modified, "bob", at(40), at(34))
	put(watch.Modified, "", at(41), at(34)) // bob releases
	put(watch.Modified, "", at(45), at(34))
	// carol keeps bob's acquireTime (an older client): her renewTime counts.
	put(watch.Modified, "carol", at(50), at(34))
	// A lease that was never held has no history.
	o.apply([]registry.Event{event(watch.Added, newLease("a", "free", "", t0, 15))})

	got := o.History("a")
	want := HistoryList{Since: t0, Depth: historyDepth, MaxLeases: defaultHistoryLeases, Leases: []LeaseHistory{{
		Namespace: "a", Name: "leader",
		Holders: []Tenure{
			{Holder: "alice", Since: at(-60), LastRenew: at(20)},
			{Holder: "bob", Since: at(34), LastRenew: at(41), Released: true, GapSeconds: 14},
			{Holder: "carol", Since: at(50), LastRenew: at(50), GapSeconds: 9},
		},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if other := o.History("b"); len(other.Leases) != 0 {
		t.Errorf("namespace b has histories: %+v", other.Leases)
	}

	// Deleted, the lease's history goes, and its place with it.
	o.apply([]registry.Event{event(watch.Deleted, newLease("a", "leader", "", time.Time{}, 0))})
	if n := len(o.History("").Leases); n != 0 || len(o.tracked) != 0 {
		t.Errorf("after the delete: %d histories, %d tracked", n, len(o.tracked))
	}
}

// The history is bounded: historyDepth tenures per lease, clipped
// holders, Options.MaxHistoryLeases leases, where a lease that changes
// holder displaces one that never did.
func TestHistoryIsBounded(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	o := newObserver(Options{Now: c.Now, MaxHistoryLeases: 3})
	t0 := c.now
	long := strings.Repeat("é", 100) // 200 bytes
	for i := range 25 {
		holder := fmt.Sprintf("h%d", i)
		if i == 24 {
			holder = long
		}
		o.apply([]registry.Event{event(watch.Modified, newLease("ctl", "flappy", holder, t0.Add(time.Duration(i)*time.Second), 15))})
	}
	h := historyOf(t, o, "ctl", "flappy")
	if len(h.Holders) != historyDepth || h.Dropped != 25-historyDepth || h.Holders[0].Holder != "h15" {
		t.Errorf("%d tenures from %s, %d dropped; want %d from h15, %d dropped", len(h.Holders), h.Holders[0].Holder, h.Dropped, historyDepth, 25-historyDepth)
	}
	if last := h.Holders[len(h.Holders)-1].Holder; len(last) != 128 || !strings.HasPrefix(long, last) {
		t.Errorf("the long holder is kept as %d bytes", len(last))
	}

	// Node leases fill the other two places; the third is not tracked.
	for i := range 3 {
		o.apply([]registry.Event{event(watch.Added, newLease("kube-node-lease", fmt.Sprintf("node-%d", i), fmt.Sprintf("node-%d", i), t0, 40))})
	}
	if l := o.History("kube-node-lease"); len(l.Leases) != 2 || l.Untracked != 1 {
		t.Errorf("node leases: %d histories, %d untracked; want 2, 1", len(l.Leases), l.Untracked)
	}
	// A new lease's renewals do not displace anyone; its holder change
	// does, taking a node lease's place, never flappy's.
	o.apply([]registry.Event{event(watch.Added, newLease("app", "leader", "x", t0, 15))})
	o.apply([]registry.Event{event(watch.Modified, newLease("app", "leader", "x", t0.Add(time.Second), 15))})
	if l := o.History("app"); len(l.Leases) != 0 || l.Untracked != 1 {
		t.Fatalf("app before its change: %d histories, %d untracked", len(l.Leases), l.Untracked)
	}
	o.apply([]registry.Event{event(watch.Modified, newLease("app", "leader", "y", t0.Add(20*time.Second), 15))})
	if l := o.History("app"); len(l.Leases) != 1 || l.Leases[0].Holders[0].Holder != "y" {
		t.Errorf("app after its change: %+v", l)
	}
	if l := o.History("kube-node-lease"); len(l.Leases) != 1 || l.Untracked != 2 {
		t.Errorf("node leases: %d histories, %d untracked; want 1, 2", len(l.Leases), l.Untracked)
	}
	if len(o.tracked) != 3 {
		t.Errorf("%d leases tracked, the cap is 3", len(o.tracked))
	}
	historyOf(t, o, "ctl", "flappy")
}

// A full history's backing array holds historyDepth tenures, no more.
func TestHistoryCapacity(t *testing.T) {
	o := newObserver(Options{})
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i := range 3 * historyDepth {
		o.apply([]registry.Event{event(watch.Modified, newLease("a", "l", fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second), 15))})
		if c := cap(o.byKey[types.NamespacedName{Namespace: "a", Name: "l"}].hist.tenures); c > historyDepth {
			t.Fatalf("after %d changes the history has room for %d tenures", i, c)
		}
	}
}
