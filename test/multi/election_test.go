package multi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/testkit/electiontest"
)

// electionNamespace holds the elections' Leases.
const electionNamespace = "kube-system"

// electionSpec is one election's client-go timing. The lease duration is
// whole seconds (Lease spec.leaseDurationSeconds).
//
// client-go's safety margin is smaller than leaseDuration - renewDeadline -
// retryPeriod: a follower compares the records it reads as JSON, where
// renewTime has a precision of one second, so its observation time only
// moves when the renewTime's second changes, and it may acquire up to a
// second less than leaseDuration after the last renewal. The margin left,
// leaseDuration - renewDeadline - retryPeriod - 1s, must still exceed the
// latency of a renewal, which under -race on two cores with etcd failing
// over reaches a few hundred milliseconds: 750 ms at least here.
type electionSpec struct {
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

var electionSpecs = []electionSpec{
	{leaseDuration: 3 * time.Second, renewDeadline: 1 * time.Second, retryPeriod: 250 * time.Millisecond},
	{leaseDuration: 4 * time.Second, renewDeadline: 2 * time.Second, retryPeriod: 250 * time.Millisecond},
	{leaseDuration: 5 * time.Second, renewDeadline: 2500 * time.Millisecond, retryPeriod: 500 * time.Millisecond},
}

// candidatesPerElection: one on every replica.
const candidatesPerElection = 3

// term is one leadership term as the candidate's callbacks saw it.
type term struct {
	who        string
	start, end time.Time // end zero while leading
}

// leaseCall is one Lease API call of a candidate.
type leaseCall struct {
	who        string
	verb       string
	start, end time.Time
	failed     bool
	// renewTime is the renewTime a create or update carried.
	renewTime time.Time
}

// election is one Lease contended by candidates spread over the replicas.
type election struct {
	name string
	spec electionSpec
	// replicaOf maps a candidate identity to its replica's index.
	replicaOf sync.Map

	// stalls measures when the test process (so every candidate) did not
	// run on time.
	stalls *electiontest.Stalls

	mu    sync.Mutex // guards terms, calls, starts and ended
	terms []term
	calls []leaseCall
	// starts is when each candidate identity started, ended when its
	// OnStoppedLeading ran.
	starts, ended map[string]time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startElection starts the candidates of election i: candidate j talks to
// replica (i+j) mod the number of replicas. A candidate whose term ends
// starts again with a new identity, as a restarted process would (client-go
// lets an identity that still holds the Lease take it back at once, so a
// reused identity would not be a failover).
func startElection(t testing.TB, d *deployment, i int, spec electionSpec, stalls *electiontest.Stalls) *election {
	e := &election{name: fmt.Sprintf("election-%d", i), spec: spec, stalls: stalls, starts: map[string]time.Time{}, ended: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	for j := range candidatesPerElection {
		r := (i + j) % len(d.replicas)
		leases := timedLeases{LeasesGetter: d.clientFor(t, r).CoordinationV1(), e: e}
		e.wg.Go(func() {
			for run := 0; ctx.Err() == nil; run++ {
				who := fmt.Sprintf("%s-c%d@%s#%d", e.name, j, d.replicas[r].Name(), run)
				e.replicaOf.Store(who, r)
				e.runCandidate(ctx, leases, who)
			}
		})
	}
	return e
}

// runCandidate runs one leader elector until its term ends or ctx does.
func (e *election) runCandidate(ctx context.Context, leases timedLeases, who string) {
	leases.who = who
	e.mu.Lock()
	e.starts[who] = time.Now()
	e.mu.Unlock()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: e.name, Namespace: electionNamespace},
			Client:     leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: who},
		},
		LeaseDuration: e.spec.leaseDuration,
		RenewDeadline: e.spec.renewDeadline,
		RetryPeriod:   e.spec.retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { e.started(who) },
			OnStoppedLeading: func() { e.stopped(who) },
		},
	})
	if err != nil {
		panic(err) // the configuration is fixed and valid
	}
	le.Run(ctx)
}

// started opens who's term. client-go calls OnStartedLeading in a
// goroutine of its own, so on a stalled machine it can run after
// OnStoppedLeading: then the term ends as it starts.
func (e *election) started(who string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tm := term{who: who, start: time.Now()}
	if _, ok := e.ended[who]; ok {
		tm.end = tm.start
	}
	e.terms = append(e.terms, tm)
}

// stopped ends who's open term. client-go calls OnStoppedLeading on every
// exit of Run, also for a candidate that never led (or whose
// OnStartedLeading has not run yet).
func (e *election) stopped(who string) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended[who] = now
	for i := len(e.terms) - 1; i >= 0; i-- {
		if e.terms[i].who == who && e.terms[i].end.IsZero() {
			e.terms[i].end = now
			return
		}
	}
}

// leader returns the identity of the candidate leading now, if any.
func (e *election) leader() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.terms) - 1; i >= 0; i-- {
		if e.terms[i].end.IsZero() {
			return e.terms[i].who, true
		}
	}
	return "", false
}

// leaderReplica returns the replica index of the current leader.
func (e *election) leaderReplica() (int, bool) {
	who, ok := e.leader()
	if !ok {
		return 0, false
	}
	r, ok := e.replicaOf.Load(who)
	if !ok {
		return 0, false
	}
	return r.(int), true
}

// stop stops every candidate and waits for them.
func (e *election) stop() {
	e.cancel()
	e.wg.Wait()
}

// check checks the election against its Lease's history in etcd: never
// two leaders (from the history and from the callbacks), and every
// failover within its bound. It returns the number of failovers.
func (e *election) check(t testing.TB, hist []version) int {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()

	// History: each new holder acquired after the previous holder's lease
	// expired, within the bound; transitions counted.
	type acquisition struct {
		from string
		// observable is the earliest time a follower can have seen the
		// record that expired.
		observable time.Time
	}
	acquired := map[string]acquisition{}
	failovers := 0
	for i, v := range hist {
		if v.deleted {
			t.Errorf("%s deleted at %d", e.name, v.rev)
			return failovers
		}
		spec := v.lease.Spec
		if spec.HolderIdentity == nil {
			continue
		}
		if i == 0 {
			acquired[*spec.HolderIdentity] = acquisition{}
			continue
		}
		prev := hist[i-1].lease.Spec
		if ptrValue(prev.HolderIdentity) == *spec.HolderIdentity {
			continue
		}
		failovers++
		took := spec.AcquireTime.Sub(prev.RenewTime.Time)
		// The earliest time any follower can have observed the record it
		// saw expire: when the first version equal to it as client-go
		// compares records was written (at or after its renewTime).
		first := i - 1
		for first > 0 && rawRecord(hist[first-1].lease) == rawRecord(hist[i-1].lease) {
			first--
		}
		observable := hist[first].lease.Spec.RenewTime.Time
		acquired[*spec.HolderIdentity] = acquisition{from: ptrValue(prev.HolderIdentity), observable: observable}
		expiry := time.Duration(ptrValue(prev.LeaseDurationSeconds)) * time.Second
		if early := spec.AcquireTime.Sub(observable); early < expiry {
			t.Errorf("%s: two leaders: %s acquired at %s (rv %d), %v after %s's record it replaced could first be observed (%s, rv %d), before its %v lease expired\n%s",
				e.name, *spec.HolderIdentity, spec.AcquireTime.Format(timeFormat), v.rev, early, ptrValue(prev.HolderIdentity),
				observable.Format(timeFormat), hist[first].rev, expiry, e.describe(hist, i, *spec.HolderIdentity))
		}
		if got, want := ptrValue(spec.LeaseTransitions), ptrValue(prev.LeaseTransitions)+1; got != want {
			t.Errorf("%s: rv %d: leaseTransitions %d after a change of holder, want %d", e.name, v.rev, got, want)
		}
		b := e.failoverBound(ptrValue(prev.HolderIdentity), *spec.HolderIdentity, prev.RenewTime.Time, spec.AcquireTime.Time)
		if took > b.total {
			t.Errorf("%s: failover from %s to %s took %v (last renewal %s, acquired %s), above its bound %v\n%s",
				e.name, ptrValue(prev.HolderIdentity), *spec.HolderIdentity, took, prev.RenewTime.Format(timeFormat), spec.AcquireTime.Format(timeFormat), b,
				e.describe(hist, i, *spec.HolderIdentity))
		} else {
			t.Logf("%s: failover from %s to %s in %v (bound %v)", e.name, ptrValue(prev.HolderIdentity), *spec.HolderIdentity, took.Round(time.Millisecond), b)
		}
	}

	// Callbacks: terms never overlap, unless the old leader's own client
	// broke client-go's timing assumptions (see overlapExplained).
	terms := slices.Clone(e.terms)
	slices.SortFunc(terms, func(a, b term) int { return a.start.Compare(b.start) })
	for i, a := range terms {
		if _, ok := acquired[a.who]; !ok {
			t.Errorf("%s: %s led from %s but never acquired the Lease", e.name, a.who, a.start.Format(timeFormat))
		}
		if a.end.IsZero() {
			t.Errorf("%s: %s's term has no end after every candidate stopped", e.name, a.who)
			continue
		}
		for _, b := range terms[i+1:] {
			if !b.start.Before(a.end) {
				continue
			}
			why, ok := e.overlapExplained(a, b, acquired[b.who].from, acquired[b.who].observable)
			msg := fmt.Sprintf("%s: two leaders for %v: %s started leading at %s while %s led (%s - %s)",
				e.name, a.end.Sub(b.start).Round(time.Millisecond), b.who, b.start.Format(timeFormat), a.who, a.start.Format(timeFormat), a.end.Format(timeFormat))
			if ok {
				t.Logf("%s, which client-go cannot prevent: %s", msg, why)
			} else {
				t.Errorf("%s; %s", msg, why)
			}
		}
	}
	return failovers
}

// overlapExplained says whether leader a's term can overlap b's without
// the server having let b acquire too early. A client-go leader stops at
// most retryPeriod + renewDeadline after its last successful renewal
// ended, if its process runs on time; the server lets b acquire no sooner
// than leaseDuration after the expired record could first be observed
// (observable). So the terms overlap only if a stopped late (its process
// stalled), or if its last renewal ended more than leaseDuration -
// retryPeriod - renewDeadline after observable (a slow renewal plus
// client-go's one-second precision): client-go has no fencing for either.
func (e *election) overlapExplained(a, b term, from string, observable time.Time) (string, bool) {
	if from != a.who {
		return fmt.Sprintf("%s acquired from %q, not from %s", b.who, from, a.who), false
	}
	var last leaseCall
	for _, c := range e.calls {
		if c.who == a.who && !c.failed && c.verb != "get" && !c.end.After(a.end) && c.end.After(last.end) {
			last = c
		}
	}
	deadline := last.end.Add(e.spec.retryPeriod + e.spec.renewDeadline + schedulingSlack)
	late := a.end.Sub(deadline)
	stalled := e.stalls.Within(last.end, a.end)
	slow := last.end.Sub(observable) - (e.spec.leaseDuration - e.spec.retryPeriod - e.spec.renewDeadline)
	why := fmt.Sprintf("%s's last renewal ended %s (took %v), so it should have stopped by %s; it stopped %v after that, the test process stalled %v meanwhile; its renewal ended %v past client-go's margin",
		a.who, last.end.Format(timeFormat), last.end.Sub(last.start).Round(time.Millisecond), deadline.Format(timeFormat),
		late.Round(time.Millisecond), stalled.Round(time.Millisecond), slow.Round(time.Millisecond))
	return why, late > 0 || slow > 0
}

// rawRecord is a Lease's leader election record as client-go's followers
// compare it (tools/leaderelection: observedRawRecord, JSON with times to
// the second).
func rawRecord(l *coordinationv1.Lease) string {
	b, err := json.Marshal(resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec))
	if err != nil {
		panic(err) // a struct of strings, numbers and times
	}
	return string(b)
}

// describe shows the versions around hist[i] and the calls of who and of
// the previous holder around them, for failure reports.
func (e *election) describe(hist []version, i int, who string) string {
	var b strings.Builder
	from := ptrValue(hist[i-1].lease.Spec.HolderIdentity)
	lo, hi := max(0, i-5), min(len(hist), i+3)
	for _, v := range hist[lo:hi] {
		s := v.lease.Spec
		fmt.Fprintf(&b, "  rv %d: holder %s acquired %s renewed %s transitions %d\n", v.rev, ptrValue(s.HolderIdentity),
			s.AcquireTime.Format(timeFormat), s.RenewTime.Format(timeFormat), ptrValue(s.LeaseTransitions))
	}
	start := hist[lo].lease.Spec.RenewTime.Add(-time.Second)
	end := hist[hi-1].lease.Spec.RenewTime.Add(time.Second)
	for _, c := range e.calls {
		if (c.who == who || c.who == from) && c.end.After(start) && c.start.Before(end) {
			fmt.Fprintf(&b, "  %s %s %s - %s failed %v renewTime %s\n", c.who, c.verb, c.start.Format(timeFormat), c.end.Format(timeFormat), c.failed, c.renewTime.Format(timeFormat))
		}
	}
	return b.String()
}

// bound is a failover bound and how it was made up.
type bound struct {
	total                           time.Duration
	lateStart                       time.Duration
	renewLatency, longestCall       time.Duration
	failedCalls                     int
	stalled                         time.Duration
	leaseDuration, jitteredRetryPer time.Duration
}

func (b bound) String() string {
	s := fmt.Sprintf("%v = lease %v + %d polls of %v + last renewal's latency %v + %d x longest call %v + %v scheduling",
		b.total.Round(time.Millisecond), b.leaseDuration, 2+b.failedCalls, b.jitteredRetryPer, b.renewLatency.Round(time.Millisecond),
		3+b.failedCalls, b.longestCall.Round(time.Millisecond), schedulingSlack)
	if b.lateStart > 0 {
		s += fmt.Sprintf(" + %v before the new leader started", b.lateStart.Round(time.Millisecond))
	}
	if b.stalled > 0 {
		s += fmt.Sprintf(" + %v the test process stalled", b.stalled.Round(time.Millisecond))
	}
	return s
}

// schedulingSlack covers timer and goroutine wake-ups on a loaded machine.
const schedulingSlack = 100 * time.Millisecond

// failoverBound is how long after the old holder's last renewTime the new
// holder may acquire, by client-go's algorithm. The old holder's renewal
// was committed at most its call's latency after renewTime. A follower
// polls retryPeriod*[1, 1+JitterFactor] after its previous attempt ended,
// so the new holder saw that renewal at most one poll plus two calls (the
// one in flight, then the one that read it) after the commit; it counts
// leaseDuration from then, and attempts again at most one poll plus one
// call after the lease expired, its acquireTime being that attempt's
// start. Each of its calls that failed in between (replica or etcd down)
// costs at most one more poll and call. A candidate that started after
// the renewal counts from its start (its first read is its first
// observation), and time the test process stalled delays everything.
func (e *election) failoverBound(from, to string, renewed, acquired time.Time) bound {
	b := bound{leaseDuration: e.spec.leaseDuration, jitteredRetryPer: time.Duration(float64(e.spec.retryPeriod) * (1 + leaderelection.JitterFactor))}
	for _, c := range e.calls {
		switch {
		case c.who == from && c.renewTime.Truncate(time.Microsecond).Equal(renewed.Truncate(time.Microsecond)):
			b.renewLatency = max(b.renewLatency, c.end.Sub(c.start))
		case c.who == to && c.end.After(renewed) && c.start.Before(acquired):
			b.longestCall = max(b.longestCall, c.end.Sub(c.start))
			if c.failed {
				b.failedCalls++
			}
		}
	}
	if started := e.starts[to]; started.After(renewed) {
		b.lateStart = started.Sub(renewed)
	}
	b.stalled = e.stalls.Within(renewed, acquired)
	b.total = b.lateStart + b.leaseDuration + time.Duration(2+b.failedCalls)*b.jitteredRetryPer + b.renewLatency +
		time.Duration(3+b.failedCalls)*b.longestCall + b.stalled + schedulingSlack
	return b
}

func (e *election) record(c leaseCall) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, c)
}

const timeFormat = "15:04:05.000000"

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// timedLeases records every Get, Create and Update a candidate's Lease
// lock makes, with its start, end and outcome.
type timedLeases struct {
	coordinationv1client.LeasesGetter
	e   *election
	who string
}

func (l timedLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return timedLeaseClient{LeaseInterface: l.LeasesGetter.Leases(namespace), l: l}
}

type timedLeaseClient struct {
	coordinationv1client.LeaseInterface
	l timedLeases
}

func (c timedLeaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	start := time.Now()
	out, err := c.LeaseInterface.Get(ctx, name, opts)
	c.l.e.record(leaseCall{who: c.l.who, verb: "get", start: start, end: time.Now(), failed: err != nil})
	return out, err
}

func (c timedLeaseClient) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	start := time.Now()
	out, err := c.LeaseInterface.Create(ctx, lease, opts)
	c.l.e.record(leaseCall{who: c.l.who, verb: "create", start: start, end: time.Now(), failed: err != nil, renewTime: renewTimeOf(lease)})
	return out, err
}

func (c timedLeaseClient) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	start := time.Now()
	out, err := c.LeaseInterface.Update(ctx, lease, opts)
	c.l.e.record(leaseCall{who: c.l.who, verb: "update", start: start, end: time.Now(), failed: err != nil, renewTime: renewTimeOf(lease)})
	return out, err
}

func renewTimeOf(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
