package leasemetrics

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
)

// clock is the test's time: it moves only when told.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newLease(ns, name, holder string, renew time.Time, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	if !renew.IsZero() {
		t := metav1.NewMicroTime(renew)
		l.Spec.RenewTime = &t
	}
	if seconds > 0 {
		l.Spec.LeaseDurationSeconds = &seconds
	}
	return l
}

func event(typ watch.EventType, l *coordinationv1.Lease) registry.Event {
	return registry.Event{Type: typ, Object: codec.Cached{Obj: l}}
}

// gather returns the text exposition of the named metrics.
func gather(t *testing.T, o *Observer, names ...string) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(o)
	var b strings.Builder
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, n := range names {
			if f.GetName() == n {
				for _, m := range f.Metric {
					var labels []string
					for _, l := range m.Label {
						labels = append(labels, l.GetName()+"="+l.GetValue())
					}
					v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
					fmt.Fprintf(&b, "%s{%s} %g\n", n, strings.Join(labels, ","), v)
				}
			}
		}
	}
	return b.String()
}

func TestExpiryRenewalsAndChanges(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	o := newObserver(Options{Now: c.Now})
	t0 := c.now
	o.apply([]registry.Event{
		event(watch.Added, newLease("a", "leader", "x", t0, 10)),
		event(watch.Added, newLease("a", "free", "", time.Time{}, 10)),
		event(watch.Added, newLease("a", "noterm", "y", t0, 0)),
	})
	// A held lease without a duration has no term: expired, as the
	// table's Expired column says (lease.Term); a lease without a holder
	// is released, never expired.
	want := "leasehold_leases_expired{namespace=a} 1\nleasehold_leases_held{namespace=a} 2\n"
	if got := gather(t, o, "leasehold_leases_held", "leasehold_leases_expired"); got != want {
		t.Fatalf("at the start:\n%s\nwant\n%s", got, want)
	}
	// The deadline is not after now: expired, as client-go judges it.
	c.now = t0.Add(10 * time.Second)
	if got := gather(t, o, "leasehold_leases_expired", "leasehold_lease_oldest_unrenewed_seconds"); got !=
		"leasehold_lease_oldest_unrenewed_seconds{namespace=a} 10\nleasehold_leases_expired{namespace=a} 2\n" {
		t.Fatalf("after 10s:\n%s", got)
	}
	// A renewal brings it back; a new holder counts as a change.
	o.apply([]registry.Event{event(watch.Modified, newLease("a", "leader", "x", c.now, 10))})
	o.apply([]registry.Event{event(watch.Modified, newLease("a", "leader", "z", c.now.Add(time.Second), 10))})
	got := gather(t, o, "leasehold_leases_expired", "leasehold_lease_renewals_total", "leasehold_lease_holder_changes_total", "leasehold_lease_info", "leasehold_lease_expired")
	want = "leasehold_lease_expired{name=free,namespace=a} 0\n" +
		"leasehold_lease_expired{name=leader,namespace=a} 0\n" +
		"leasehold_lease_expired{name=noterm,namespace=a} 1\n" +
		"leasehold_lease_holder_changes_total{namespace=a} 1\n" +
		"leasehold_lease_info{holder=,name=free,namespace=a,preferred_holder=,strategy=} 1\n" +
		"leasehold_lease_info{holder=y,name=noterm,namespace=a,preferred_holder=,strategy=} 1\n" +
		"leasehold_lease_info{holder=z,name=leader,namespace=a,preferred_holder=,strategy=} 1\n" +
		"leasehold_lease_renewals_total{namespace=a} 1\n" +
		"leasehold_leases_expired{namespace=a} 1\n"
	if got != want {
		t.Fatalf("after a renewal and a change:\n%s\nwant\n%s", got, want)
	}
	// Deleted leases leave the counts; a list that no longer sees one
	// drops it at its end.
	o.apply([]registry.Event{event(watch.Deleted, newLease("a", "free", "", time.Time{}, 0))})
	o.listing()
	o.apply([]registry.Event{
		event(watch.Added, newLease("a", "leader", "z", c.now.Add(time.Second), 10)),
		{Type: watch.Bookmark, InitialEnd: true},
	})
	if got := gather(t, o, "leasehold_leases_held"); got != "leasehold_leases_held{namespace=a} 1\n" {
		t.Fatalf("after a new list:\n%s", got)
	}
}

func TestPerLeaseSeriesAreBounded(t *testing.T) {
	c := &clock{now: time.Now()}
	o := newObserver(Options{Now: c.Now, SmallNamespace: 3, MaxLeaseSeries: 4})
	var evs []registry.Event
	for i := range 10 {
		evs = append(evs, event(watch.Added, newLease("big", fmt.Sprint(i), "h", c.now, 10)))
	}
	for _, ns := range []string{"a", "b", "c"} {
		for i := range 2 {
			evs = append(evs, event(watch.Added, newLease(ns, fmt.Sprint(i), "h", c.now, 10)))
		}
	}
	o.apply(evs)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(o)
	// a and b fit the budget of 4; c and big do not.
	if n := testutil.CollectAndCount(o, "leasehold_lease_info"); n != 4 {
		t.Errorf("%d leases with per-lease series, want 4", n)
	}
	if got := gather(t, o, "leasehold_lease_series_omitted"); got != "leasehold_lease_series_omitted{} 12\n" {
		t.Errorf("omitted: %s", got)
	}
}

// BenchmarkRenewal is the observer's cost of one renewal among 100,000
// leases.
func BenchmarkRenewal(b *testing.B) {
	now := time.Now()
	o := newObserver(Options{})
	var evs []registry.Event
	for i := range 100000 {
		evs = append(evs, event(watch.Added, newLease("kube-node-lease", fmt.Sprintf("node-%06d", i), "kubelet", now, 40)))
	}
	o.apply(evs)
	renewals := make([]registry.Event, 1000)
	for i := range renewals {
		renewals[i] = event(watch.Modified, newLease("kube-node-lease", fmt.Sprintf("node-%06d", i*100), "kubelet", now.Add(time.Second), 40))
	}
	b.ResetTimer()
	for i := range b.N {
		o.apply(renewals[i%len(renewals) : i%len(renewals)+1])
	}
}

// BenchmarkScrape is the cost of collecting the lease metrics with
// 100,000 node leases and 20 leader-election leases loaded.
func BenchmarkScrape(b *testing.B) {
	now := time.Now()
	o := newObserver(Options{})
	var evs []registry.Event
	for i := range 100000 {
		evs = append(evs, event(watch.Added, newLease("kube-node-lease", fmt.Sprintf("node-%06d", i), "kubelet", now, 40)))
	}
	for i := range 20 {
		evs = append(evs, event(watch.Added, newLease("kube-system", fmt.Sprintf("controller-%d", i), "leader", now, 15)))
	}
	o.apply(evs)
	reg := prometheus.NewRegistry()
	reg.MustRegister(o)
	b.ResetTimer()
	for range b.N {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAgainstModel drives an observer with random renewals, holder
// changes, deletes and scrapes of a few leases, its heaps filling with
// stale items and being rebuilt, and holds its counts to a model that
// keeps the leases in a map and looks at every one at each scrape.
func TestAgainstModel(t *testing.T) {
	type state struct {
		holder          string
		renew, deadline time.Time
		expired         bool
	}
	c := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	o := newObserver(Options{Now: c.Now})
	model := map[types.NamespacedName]*state{}
	rng := rand.New(rand.NewPCG(1, 2))
	names := []types.NamespacedName{{Namespace: "a", Name: "1"}, {Namespace: "a", Name: "2"}, {Namespace: "a", Name: "3"}, {Namespace: "b", Name: "1"}, {Namespace: "b", Name: "2"}, {Namespace: "c", Name: "1"}}
	expect := func() string {
		held, expired := map[string]int{}, map[string]int{}
		oldest := map[string]time.Time{}
		for k, s := range model {
			if s.holder == "" {
				continue
			}
			// A held lease without a term (zero deadline) has expired.
			if !s.deadline.After(c.now) {
				s.expired = true
			}
			held[k.Namespace]++
			if s.expired {
				expired[k.Namespace]++
			}
			if !s.renew.IsZero() && (oldest[k.Namespace].IsZero() || s.renew.Before(oldest[k.Namespace])) {
				oldest[k.Namespace] = s.renew
			}
		}
		// In gather's order: by metric name, then namespace; a
		// namespace is there while it has a lease, held or not.
		var b strings.Builder
		for _, ns := range []string{"a", "b", "c"} {
			if t, ok := oldest[ns]; ok {
				fmt.Fprintf(&b, "leasehold_lease_oldest_unrenewed_seconds{namespace=%s} %g\n", ns, c.now.Sub(t).Seconds())
			}
		}
		for _, ns := range []string{"a", "b", "c"} {
			if anyIn(model, ns) {
				fmt.Fprintf(&b, "leasehold_leases_expired{namespace=%s} %d\n", ns, expired[ns])
			}
		}
		for _, ns := range []string{"a", "b", "c"} {
			if anyIn(model, ns) {
				fmt.Fprintf(&b, "leasehold_leases_held{namespace=%s} %d\n", ns, held[ns])
			}
		}
		return b.String()
	}
	for step := range 3000 {
		k := names[rng.IntN(len(names))]
		switch r := rng.IntN(10); {
		case r < 6:
			holder := []string{"", "x", "y"}[rng.IntN(3)]
			renew := c.now.Add(-time.Duration(rng.IntN(4)) * time.Second)
			if rng.IntN(5) == 0 {
				renew = time.Time{}
			}
			seconds := []int32{0, 2, 5}[rng.IntN(3)]
			s := &state{holder: holder, renew: renew}
			if holder != "" && !renew.IsZero() && seconds > 0 {
				s.deadline = renew.Add(time.Duration(seconds) * time.Second)
			}
			if old, ok := model[k]; ok {
				s.expired = old.expired && s.deadline.Equal(old.deadline)
			}
			model[k] = s
			typ := watch.Added
			if rng.IntN(2) == 0 {
				typ = watch.Modified
			}
			o.apply([]registry.Event{event(typ, newLease(k.Namespace, k.Name, holder, renew, seconds))})
		case r < 7:
			delete(model, k)
			o.apply([]registry.Event{event(watch.Deleted, newLease(k.Namespace, k.Name, "", time.Time{}, 0))})
		case r < 9:
			c.now = c.now.Add(time.Duration(rng.IntN(3)) * time.Second)
		default:
			want := expect()
			if got := gather(t, o, "leasehold_leases_held", "leasehold_leases_expired", "leasehold_lease_oldest_unrenewed_seconds"); got != want {
				t.Fatalf("step %d:\n%s\nwant\n%s", step, got, want)
			}
		}
	}
}

// TestHeapsStayBounded: with nobody scraping, renewals leave stale items
// on the heaps, which rebuilds keep within about twice the leases.
func TestHeapsStayBounded(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	o := newObserver(Options{Now: func() time.Time { return now }})
	for i := range 20000 {
		now = now.Add(time.Millisecond)
		o.apply([]registry.Event{event(watch.Modified, newLease("ns", fmt.Sprint(i%10), "x", now, 15))})
	}
	if n, ns := len(o.expiring), len(o.namespaces["ns"].byRenew); n > 2*10+65 || ns > 2*10+65 {
		t.Errorf("%d deadlines and %d renewTimes on the heaps for 10 leases", n, ns)
	}
}

func anyIn[V any](m map[types.NamespacedName]V, ns string) bool {
	for k := range m {
		if k.Namespace == ns {
			return true
		}
	}
	return false
}
