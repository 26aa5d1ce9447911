package leasemetrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/lease"
)

// Options configure an Observer; the zero value is usable.
type Options struct {
	// SmallNamespace is the most leases a namespace may hold for its
	// leases to get per-lease series; 0 means 64.
	SmallNamespace int
	// MaxLeaseSeries bounds the leases with per-lease series; 0 means
	// 1000.
	MaxLeaseSeries int
	// MaxHistoryLeases bounds the leases with a holder history
	// (History); 0 means 4096.
	MaxHistoryLeases int
	// Now is the clock expiry is judged by; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Observer keeps lease metrics; it is a prometheus.Collector. Run feeds
// it.
type Observer struct {
	reg    *registry.Registry
	leases resources.Resource
	opts   Options
	log    *slog.Logger

	renewals, changes *prometheus.CounterVec
	desc              descs

	// mu guards the fields below.
	mu sync.Mutex
	// byKey holds every lease.
	byKey map[types.NamespacedName]*entry
	// namespaces holds the counts of every namespace with a lease.
	namespaces map[string]*namespace
	// expiring holds the deadlines of the held leases not yet seen
	// expired (as of the last scrape), and stale ones.
	expiring timeHeap
	// gen is the generation of the current list; entries a new list did
	// not see are dropped at its end.
	gen int
	// tracked holds the entries with a history, at most
	// Options.MaxHistoryLeases.
	tracked map[*entry]struct{}
	// started is when the observer was made: histories begin there.
	started time.Time
}

// entry is what the observer keeps of one lease.
type entry struct {
	types.NamespacedName
	holder string
	renew  time.Time // zero when unset
	// term decides expiry, as for the table's Expired column.
	term lease.Term
	// expired is set once the term has expired (at a scrape).
	expired     bool
	transitions int32
	hasTrans    bool
	strategy    string
	preferred   string
	gen         int
	// removed: the lease is gone; its heap items are stale.
	removed bool
	// hist is the lease's holder history; nil when untracked.
	hist *history
}

// held reports whether the lease has a holder.
func (e *entry) held() bool { return e.term.Held }

// namespace is what the observer counts per namespace.
type namespace struct {
	// all holds the namespace's leases by name.
	all           map[string]*entry
	held, expired int
	// byRenew holds the renewTimes of the held leases, and stale ones.
	byRenew timeHeap
	// renewals and changes are the namespace's counters.
	renewals, changes prometheus.Counter
}

type descs struct {
	held, expired, oldest, omitted      *prometheus.Desc
	info, sinceRenew, expiredOne, trans *prometheus.Desc
}

// New returns an Observer of the leases reg serves. It serves nothing
// until Run runs.
func New(reg *registry.Registry, opts Options) (*Observer, error) {
	leases, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		return nil, errors.New("leasemetrics: leases are not served")
	}
	o := newObserver(opts)
	o.reg, o.leases = reg, leases
	return o, nil
}

// newObserver returns an Observer that nothing feeds yet.
func newObserver(opts Options) *Observer {
	if opts.SmallNamespace == 0 {
		opts.SmallNamespace = 64
	}
	if opts.MaxLeaseSeries == 0 {
		opts.MaxLeaseSeries = 1000
	}
	if opts.MaxHistoryLeases == 0 {
		opts.MaxHistoryLeases = defaultHistoryLeases
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ns := []string{"namespace"}
	one := []string{"namespace", "name"}
	return &Observer{
		opts: opts,
		log:  opts.Logger.With("controller", "lease-metrics"),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_lease_renewals_total",
			Help: "Renewals of leases (a new renewTime with the same holder), per namespace.",
		}, ns),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_lease_holder_changes_total",
			Help: "Leases taken by a new holder (holderIdentity changed to another non-empty value), per namespace.",
		}, ns),
		desc: descs{
			held:    prometheus.NewDesc("leasehold_leases_held", "Leases with a holder, per namespace.", ns, nil),
			expired: prometheus.NewDesc("leasehold_leases_expired", "Leases with a holder whose renewTime plus leaseDurationSeconds has passed without a renewal (or who lacks either), per namespace.", ns, nil),
			oldest: prometheus.NewDesc("leasehold_lease_oldest_unrenewed_seconds",
				"Seconds since the renewTime of the held lease renewed longest ago, per namespace.", ns, nil),
			omitted: prometheus.NewDesc("leasehold_lease_series_omitted",
				"Leases without per-lease series: in namespaces of more than the small-namespace limit, or beyond the per-lease series limit.", nil, nil),
			info: prometheus.NewDesc("leasehold_lease_info", "A lease with per-lease series, its holder and its coordinated leader election fields (1).",
				[]string{"namespace", "name", "holder", "strategy", "preferred_holder"}, nil),
			sinceRenew: prometheus.NewDesc("leasehold_lease_seconds_since_renew", "Seconds since the lease's renewTime (leases with a renewTime).", one, nil),
			expiredOne: prometheus.NewDesc("leasehold_lease_expired", "1 when the lease has expired (as leasehold_leases_expired counts), else 0; a lease without a holder is released, not expired.", one, nil),
			trans:      prometheus.NewDesc("leasehold_lease_transitions", "The lease's spec.leaseTransitions (leases that have it).", one, nil),
		},
		byKey:      map[types.NamespacedName]*entry{},
		namespaces: map[string]*namespace{},
		tracked:    map[*entry]struct{}{},
		started:    opts.Now(),
	}
}

// expiringNow reports whether it is its entry's current deadline, not
// yet seen passed.
func expiringNow(it timeItem) bool {
	e := it.e
	return !e.removed && e.held() && !e.expired && nanos(e.term.End) == it.at
}

// renewedAt reports whether it is its entry's current renewTime.
func renewedAt(it timeItem) bool {
	e := it.e
	return !e.removed && e.held() && nanos(e.renew) == it.at
}

// Controller returns the observer as a controller of every replica.
func (o *Observer) Controller() controllers.Controller {
	return controllers.Controller{Name: "lease-metrics", Run: o.Run}
}

// Run follows the leases until ctx ends, as controllers.Follower does.
func (o *Observer) Run(ctx context.Context) error {
	// Metrics are scraped, not waited for: renewals are taken in
	// batches.
	f := &controllers.Follower{
		Registry: o.reg, Resource: o.leases, Log: o.log,
		Listing: o.listing, Apply: o.apply, Pace: 50 * time.Millisecond,
	}
	return f.Run(ctx)
}

// listing starts a new generation: entries the list does not see again
// are dropped at its end.
func (o *Observer) listing() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++
}

// apply applies a batch of events. During a list, renewals and holder
// changes are still counted against what an earlier list saw.
func (o *Observer) apply(events []registry.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range events {
		switch ev.Type {
		case watch.Bookmark:
			if ev.InitialEnd {
				o.sweepLocked()
			}
		case watch.Added, watch.Modified:
			l, ok := ev.Object.Object().(*coordinationv1.Lease)
			if !ok {
				continue
			}
			o.putLocked(l)
		case watch.Deleted:
			if m := ev.Object.Object(); m != nil {
				o.removeLocked(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
			}
		}
	}
}

// putLocked records a lease's new state.
func (o *Observer) putLocked(l *coordinationv1.Lease) {
	k := types.NamespacedName{Namespace: l.Namespace, Name: l.Name}
	n := entry{NamespacedName: k, gen: o.gen}
	s := &l.Spec
	if s.HolderIdentity != nil {
		n.holder = *s.HolderIdentity
	}
	if s.RenewTime != nil {
		n.renew = s.RenewTime.Time
	}
	n.term = lease.TermOf(s)
	if s.LeaseTransitions != nil {
		n.transitions, n.hasTrans = *s.LeaseTransitions, true
	}
	if s.Strategy != nil {
		n.strategy = string(*s.Strategy)
	}
	if s.PreferredHolder != nil {
		n.preferred = *s.PreferredHolder
	}
	e, ok := o.byKey[k]
	if !ok {
		e = &entry{}
		*e = n
		o.recordLocked(e, l, true)
		o.byKey[k] = e
		ns := o.namespaces[k.Namespace]
		if ns == nil {
			ns = &namespace{all: map[string]*entry{},
				renewals: o.renewals.WithLabelValues(k.Namespace), changes: o.changes.WithLabelValues(k.Namespace)}
			o.namespaces[k.Namespace] = ns
		}
		ns.all[k.Name] = e
		o.countLocked(e, ns, +1, true, true)
		return
	}
	ns := o.namespaces[k.Namespace]
	switch {
	case n.held() && n.holder != e.holder:
		ns.changes.Inc()
	case n.held() && !n.renew.Equal(e.renew):
		ns.renewals.Inc()
	}
	// An unchanged term keeps an expiry already seen.
	n.expired = e.expired && n.term.Held == e.term.Held && n.term.End.Equal(e.term.End)
	// The entry is updated in place. A heap item stays good while its
	// time is still the entry's (renewedAt, expiringNow), so a new one is
	// pushed only for a time that changed or that no good item stood for.
	pushRenew := !renewedAt(timeItem{nanos(e.renew), e}) || !n.renew.Equal(e.renew)
	pushDeadline := !expiringNow(timeItem{nanos(e.term.End), e}) || !n.term.End.Equal(e.term.End)
	o.countLocked(e, ns, -1, false, false)
	o.recordLocked(e, l, false)
	n.hist = e.hist
	*e = n
	o.countLocked(e, ns, +1, pushRenew, pushDeadline)
}

// countLocked adds (d = 1) or takes (d = -1) e to or from its
// namespace's counts; adding, it pushes e's renewTime and deadline on
// their heaps when told to.
func (o *Observer) countLocked(e *entry, ns *namespace, d int, pushRenew, pushDeadline bool) {
	if !e.held() {
		return
	}
	ns.held += d
	if d > 0 && pushRenew && !e.renew.IsZero() {
		ns.byRenew.push(timeItem{nanos(e.renew), e}, len(ns.all), renewedAt)
	}
	switch {
	case e.expired:
		ns.expired += d
	case d > 0 && pushDeadline:
		// A held lease without a term has the zero time: it expires at
		// the next scrape.
		o.expiring.push(timeItem{nanos(e.term.End), e}, len(o.byKey), expiringNow)
	}
}

func (o *Observer) removeLocked(k types.NamespacedName) {
	e, ok := o.byKey[k]
	if !ok {
		return
	}
	delete(o.byKey, k)
	ns := o.namespaces[k.Namespace]
	delete(ns.all, k.Name)
	o.countLocked(e, ns, -1, false, false)
	o.untrackLocked(e)
	e.removed = true
	if len(ns.all) == 0 {
		delete(o.namespaces, k.Namespace)
	}
}

// sweepLocked drops the leases the list that just ended did not see.
func (o *Observer) sweepLocked() {
	var gone []types.NamespacedName
	for k, e := range o.byKey {
		if e.gen != o.gen {
			gone = append(gone, k)
		}
	}
	for _, k := range gone {
		o.removeLocked(k)
	}
}

// expireLocked marks the held leases whose term has expired at now
// (lease.Term.Expired) as expired.
func (o *Observer) expireLocked(now time.Time) {
	for {
		it, ok := o.expiring.min(expiringNow)
		if !ok || !it.e.term.Expired(now) {
			return
		}
		o.expiring.pop()
		it.e.expired = true
		o.namespaces[it.e.Namespace].expired++
	}
}

// timeItem is a lease's time (a deadline, a renewTime) on a timeHeap, as
// nanos gives it: an item is 16 bytes, not 32, and the heaps hold one or
// two a lease.
type timeItem struct {
	at int64
	e  *entry
}

// nanos is t in Unix nanoseconds; the zero time (a held lease without a
// term: expired at once) comes before any other.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// timeHeap is a min-heap of times that keeps stale items (those a
// predicate rejects) until they come to the top or the heap is rebuilt.
// Its few lines are its own rather than container/heap's, whose Push and
// Pop take items as interfaces: an allocation per renewal.
type timeHeap []timeItem

// push adds it, first rebuilding the heap without its stale items when
// it holds more than twice the live ones (live: how many may be good).
func (h *timeHeap) push(it timeItem, live int, good func(timeItem) bool) {
	if len(*h) > 2*live+64 {
		kept := (*h)[:0]
		for _, x := range *h {
			if good(x) {
				kept = append(kept, x)
			}
		}
		clear((*h)[len(kept):])
		*h = kept
		for i := len(kept)/2 - 1; i >= 0; i-- {
			h.down(i)
		}
	}
	*h = append(*h, it)
	h.up(len(*h) - 1)
}

// min is the earliest good item, after popping the stale ones above it.
func (h *timeHeap) min(good func(timeItem) bool) (timeItem, bool) {
	for len(*h) > 0 {
		if it := (*h)[0]; good(it) {
			return it, true
		}
		h.pop()
	}
	return timeItem{}, false
}

func (h *timeHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	old[n] = timeItem{}
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
}

func (h timeHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[i].at >= h[parent].at {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h timeHeap) down(i int) {
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].at < h[least].at {
			least = l
		}
		if r < len(h) && h[r].at < h[least].at {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.renewals.Describe(ch)
	o.changes.Describe(ch)
	d := o.desc
	for _, x := range []*prometheus.Desc{d.held, d.expired, d.oldest, d.omitted, d.info, d.sinceRenew, d.expiredOne, d.trans} {
		ch <- x
	}
}

// Collect implements prometheus.Collector: it first moves the leases
// whose deadline has passed to the expired counts.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.renewals.Collect(ch)
	o.changes.Collect(ch)
	now := o.opts.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expireLocked(now)
	d := o.desc
	names := make([]string, 0, len(o.namespaces))
	for name, ns := range o.namespaces {
		names = append(names, name)
		ch <- prometheus.MustNewConstMetric(d.held, prometheus.GaugeValue, float64(ns.held), name)
		ch <- prometheus.MustNewConstMetric(d.expired, prometheus.GaugeValue, float64(ns.expired), name)
		if it, ok := ns.byRenew.min(renewedAt); ok {
			ch <- prometheus.MustNewConstMetric(d.oldest, prometheus.GaugeValue, now.Sub(time.Unix(0, it.at)).Seconds(), name)
		}
	}
	// Per-lease series, for small namespaces only, in order, up to the
	// limit.
	slices.Sort(names)
	budget, omitted := o.opts.MaxLeaseSeries, 0
	for _, name := range names {
		ns := o.namespaces[name]
		n := len(ns.all)
		if n > o.opts.SmallNamespace || n > budget {
			omitted += n
			continue
		}
		budget -= n
		leases := slices.Collect(maps.Values(ns.all))
		slices.SortFunc(leases, func(a, b *entry) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range leases {
			o.collectLease(ch, e, now)
		}
	}
	ch <- prometheus.MustNewConstMetric(d.omitted, prometheus.GaugeValue, float64(omitted))
}

func (o *Observer) collectLease(ch chan<- prometheus.Metric, e *entry, now time.Time) {
	d := o.desc
	ns, name := e.Namespace, e.Name
	ch <- prometheus.MustNewConstMetric(d.info, prometheus.GaugeValue, 1, ns, name, e.holder, e.strategy, e.preferred)
	if !e.renew.IsZero() {
		ch <- prometheus.MustNewConstMetric(d.sinceRenew, prometheus.GaugeValue, now.Sub(e.renew).Seconds(), ns, name)
	}
	v := 0.0
	if e.expired {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(d.expiredOne, prometheus.GaugeValue, v, ns, name)
	if e.hasTrans {
		ch <- prometheus.MustNewConstMetric(d.trans, prometheus.GaugeValue, float64(e.transitions), ns, name)
	}
}

// String describes the observer's state, for tests and logs.
func (o *Observer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	expiring := 0
	for _, it := range o.expiring {
		if expiringNow(it) {
			expiring++
		}
	}
	return fmt.Sprintf("%d leases in %d namespaces, %d expiring", len(o.byKey), len(o.namespaces), expiring)
}
