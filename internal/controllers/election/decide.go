package election

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/blang/semver/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kube-apiserver's times (pkg/controlplane/controller/leaderelection).
const (
	// PingTimeout is how long a pinged candidate has to answer by
	// renewing (kube-apiserver's electionDuration). A candidate renewed
	// this recently needs no ping.
	PingTimeout = 5 * time.Second
	// assignedLeaseSeconds is the leaseDurationSeconds of a Lease the
	// controller hands to a candidate, which the candidate replaces with
	// its own when it first renews (defaultLeaseDurationSeconds).
	assignedLeaseSeconds int32 = 5
	// candidateExpiry: a candidate not renewed for this long takes no
	// part in elections and is deleted (leaseCandidateValidDuration).
	candidateExpiry = 30 * time.Minute
	// refreshAfter: a candidate not renewed for this long is pinged, so
	// that live candidates renew long before they expire.
	refreshAfter = candidateExpiry / 2
)

// plan is what the controller does for one Lease at one moment: decided
// by decide from the Lease and its candidates alone, so that the
// controller keeps no state of its own between steps.
type plan struct {
	// ping lists the candidates to ask for a renewal (pingTime := now).
	ping []*coordinationv1beta1.LeaseCandidate
	// create is a Lease to create; update the Lease changed (a copy,
	// with the resourceVersion it was read at). At most one is set.
	create, update *coordinationv1.Lease
	// why says what the write does, for the log.
	why string
	// next is when to look again if nothing changes before; zero: only
	// when something changes.
	next time.Time
	// err is why no election can run (candidates disagree on the
	// strategy); it lasts until a candidate changes.
	err error
}

// decide is one step of the election of the Lease key, in the manner of
// kube-apiserver's reconcileElectionStep: from the state of the Lease
// (nil when missing) and of its candidates (every LeaseCandidate of its
// namespace naming it) it either does nothing, pings candidates whose
// liveness must be known first, or writes the Lease: the best live
// candidate becomes holder when the Lease is missing, free or expired, or
// its preferredHolder when the holder is alive and a better candidate is
// up. decide does not modify its arguments.
//
// Where it differs from kube-apiserver, it is to never stall:
//   - a candidate that did not answer a ping within PingTimeout is dead
//     until it renews; it is not pinged again, and no election waits for
//     it;
//   - an election waits only for answers that could change its outcome
//     (from candidates better than the best live one), and counts an
//     answer to a ping as proof of life for 2*PingTimeout, so an answer
//     is not lost to waiting for a slower candidate;
//   - after a Lease is released or expires, only proof of life from after
//     the release or the end of the term counts, so that neither the
//     holder that just stopped nor a candidate that stopped meanwhile is
//     elected on the strength of an earlier renewal;
//   - an expired Lease is handed out again also when the best candidate
//     is the expired holder (kube-apiserver leaves it expired, and
//     client-go never renews an expired Lease: a stall);
//   - a preferredHolder naming a candidate that is gone, dead or no
//     longer better than the holder is cleared, so that the holder keeps
//     renewing instead of waiting out a handover that cannot happen
//     (kubernetes/kubernetes#138066);
//   - next is always set while something is pending, so no step depends
//     on an event that may never come.
//
// It also counts holder changes in leaseTransitions, which kube-apiserver
// leaves alone, so that the count works as in client-go's own elections.
func decide(now time.Time, namespace, name string, lease *coordinationv1.Lease, cands []*coordinationv1beta1.LeaseCandidate) plan {
	var p plan
	var known []*coordinationv1beta1.LeaseCandidate // renewed recently enough to count
	for _, c := range cands {
		if c.Spec.RenewTime != nil && c.Spec.RenewTime.Add(candidateExpiry).After(now) {
			known = append(known, c)
		}
	}
	// Sorted by name: every step sees them in the same order.
	slices.SortFunc(known, func(a, b *coordinationv1beta1.LeaseCandidate) int { return cmp.Compare(a.Name, b.Name) })
	var alive []*coordinationv1beta1.LeaseCandidate // responsive or pending
	for _, c := range known {
		if stateOf(c, now) != dead {
			alive = append(alive, c)
		}
	}
	if len(alive) == 0 {
		// Dead candidates come back by renewing: an event.
		return p
	}
	refresh, refreshAt := refreshes(alive, now)
	strategy, err := pickStrategy(alive)
	if err != nil {
		p.err = err
		return p
	}
	held := lease != nil && holderOf(lease) != "" && !expired(lease, now)

	if strategy != coordinationv1.OldestEmulationVersion {
		// Another controller picks the holder: only make sure the Lease
		// exists and, when free or expired, names the strategy.
		p.ping, p.next = refresh, refreshAt
		switch {
		case lease == nil:
			p.create = newLease(namespace, name, strategy, "", now)
			p.why = "created without holder for strategy " + string(strategy)
		case !held && (lease.Spec.Strategy == nil || *lease.Spec.Strategy != strategy):
			p.update = lease.DeepCopy()
			p.update.Spec.Strategy = &strategy
			p.why = "strategy set to " + string(strategy)
		case held && (lease.Spec.Strategy == nil || *lease.Spec.Strategy != strategy):
			p.next = earliest(p.next, expiry(lease))
		}
		return p
	}

	best := bestOf(alive, func(*coordinationv1beta1.LeaseCandidate) bool { return true })
	if best == nil {
		return p // no candidate has usable versions
	}
	if held && holderOf(lease) == best.Name {
		// The best candidate leads: keep it so.
		p.ping, p.next = refresh, earliest(refreshAt, expiry(lease))
		if pref := lease.Spec.PreferredHolder; (pref != nil && *pref != "") || lease.Spec.Strategy == nil || *lease.Spec.Strategy != strategy {
			p.update = lease.DeepCopy()
			p.update.Spec.PreferredHolder = nil
			p.update.Spec.Strategy = &strategy
			p.why = "stale preferredHolder cleared"
			if pref == nil || *pref == "" {
				p.why = "strategy set"
			}
		}
		return p
	}

	// An election: the Lease is missing, free or expired, or a better
	// candidate than its holder is up. The winner is the best live
	// candidate, once every better one has proved dead. A Lease that was
	// released or expired counts only what candidates showed since (the
	// release, or the end of the term): the holder that let it go may
	// have stopped, and so may others.
	var since time.Time
	if lease != nil && !held {
		since = expiry(lease)
		if holderOf(lease) == "" && lease.Spec.RenewTime != nil {
			since = lease.Spec.RenewTime.Time
		}
	}
	isLive := func(c *coordinationv1beta1.LeaseCandidate) bool { return live(c, now) && c.Spec.RenewTime.After(since) }
	bestLive := bestOf(alive, isLive)
	var ask []*coordinationv1beta1.LeaseCandidate
	var wait time.Time
	for _, c := range alive {
		if isLive(c) || !validForOldest(c) || bestLive != nil && compare(c, bestLive) > 0 {
			continue
		}
		if stateOf(c, now) == pending {
			wait = earliest(wait, c.Spec.PingTime.Add(PingTimeout))
		} else {
			ask = append(ask, c)
		}
	}
	if len(ask) > 0 {
		p.ping = mergePings(ask, refresh)
		p.next = now.Add(PingTimeout)
		return p
	}
	p.ping = refresh
	if !wait.IsZero() || bestLive == nil {
		p.next = earliest(wait, refreshAt)
		return p
	}
	electee := bestLive.Name
	switch {
	case lease == nil:
		p.create = newLease(namespace, name, strategy, electee, now)
		p.why = "created for " + electee
	case !held:
		p.update = lease.DeepCopy()
		s := &p.update.Spec
		if holderOf(lease) != electee {
			n := int32(0)
			if s.LeaseTransitions != nil {
				n = *s.LeaseTransitions + 1
			}
			s.LeaseTransitions = &n
		}
		s.HolderIdentity = &electee
		s.PreferredHolder = nil
		s.Strategy = &strategy
		s.LeaseDurationSeconds = ptr(assignedLeaseSeconds)
		s.RenewTime = &metav1.MicroTime{Time: now}
		s.AcquireTime = nil
		p.why = fmt.Sprintf("holder %q (was %q, expired or free)", electee, holderOf(lease))
	default: // held by a worse candidate, or by no candidate at all
		if pref := lease.Spec.PreferredHolder; pref == nil || *pref != electee || lease.Spec.Strategy == nil || *lease.Spec.Strategy != strategy {
			p.update = lease.DeepCopy()
			p.update.Spec.PreferredHolder = &electee
			p.update.Spec.Strategy = &strategy
			p.why = fmt.Sprintf("preferredHolder %q (holder %q)", electee, holderOf(lease))
		}
	}
	// Look again when the Lease would expire: a holder that does not
	// take it, or leaves it, is replaced then.
	if p.create != nil {
		p.next = expiry(p.create)
	} else if p.update != nil {
		p.next = expiry(p.update)
	} else {
		p.next = expiry(lease)
	}
	p.next = earliest(p.next, refreshAt)
	return p
}

// candidateState is what decide knows of a candidate's liveness.
type candidateState int

const (
	// responsive: never pinged, or renewed since its last ping.
	responsive candidateState = iota
	// pending: pinged less than PingTimeout ago, not renewed since.
	pending
	// dead: did not renew within PingTimeout of its last ping.
	dead
)

// stateOf tells c's state; c.Spec.RenewTime is set.
func stateOf(c *coordinationv1beta1.LeaseCandidate, now time.Time) candidateState {
	ping, renew := c.Spec.PingTime, c.Spec.RenewTime
	if ping == nil || !renew.Before(ping) {
		return responsive
	}
	if now.Before(ping.Add(PingTimeout)) {
		return pending
	}
	return dead
}

// live reports whether c showed recently that it runs: it renewed within
// PingTimeout, or answered a ping sent within 2*PingTimeout (so that an
// answer is not lost while the election waits for a slower one).
func live(c *coordinationv1beta1.LeaseCandidate, now time.Time) bool {
	ping, renew := c.Spec.PingTime, c.Spec.RenewTime
	if renew.Add(PingTimeout).After(now) {
		return true
	}
	return ping != nil && !renew.Before(ping) && ping.Add(2*PingTimeout).After(now)
}

// refreshes returns the responsive candidates not renewed for
// refreshAfter, to ping, and when the next of the others will be.
func refreshes(alive []*coordinationv1beta1.LeaseCandidate, now time.Time) ([]*coordinationv1beta1.LeaseCandidate, time.Time) {
	var out []*coordinationv1beta1.LeaseCandidate
	var next time.Time
	for _, c := range alive {
		if stateOf(c, now) != responsive {
			continue
		}
		at := c.Spec.RenewTime.Add(refreshAfter)
		if !at.After(now) {
			out = append(out, c)
		} else {
			next = earliest(next, at)
		}
	}
	return out, next
}

// mergePings returns a and the candidates of b not in a.
func mergePings(a, b []*coordinationv1beta1.LeaseCandidate) []*coordinationv1beta1.LeaseCandidate {
	out := slices.Clone(a)
	for _, c := range b {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// pickStrategy is the strategy of the candidates of the newest binary
// version, as kube-apiserver's pickBestStrategy; they must agree.
// (kube-apiserver also fails when two older candidates disagree, if it
// happens to meet them first; here only the newest count.)
func pickStrategy(cands []*coordinationv1beta1.LeaseCandidate) (coordinationv1.CoordinatedLeaseStrategy, error) {
	var top *coordinationv1beta1.LeaseCandidate
	for _, c := range cands {
		if top == nil || binaryVersion(c).GT(binaryVersion(top)) {
			top = c
		}
	}
	for _, c := range cands {
		if binaryVersion(c).EQ(binaryVersion(top)) && c.Spec.Strategy != top.Spec.Strategy {
			return "", fmt.Errorf("candidates %q and %q, both at binary version %s, want different strategies %q and %q",
				top.Name, c.Name, binaryVersion(top), top.Spec.Strategy, c.Spec.Strategy)
		}
	}
	return top.Spec.Strategy, nil
}

// bestOf returns the best candidate by OldestEmulationVersion among those
// that ok accepts and whose versions parse; nil when there is none.
func bestOf(cands []*coordinationv1beta1.LeaseCandidate, ok func(*coordinationv1beta1.LeaseCandidate) bool) *coordinationv1beta1.LeaseCandidate {
	var best *coordinationv1beta1.LeaseCandidate
	for _, c := range cands {
		if !ok(c) || !validForOldest(c) {
			continue
		}
		if best == nil || compare(c, best) < 0 {
			best = c
		}
	}
	return best
}

// compare orders candidates by OldestEmulationVersion, the best first:
// the lowest emulation version, then the lowest binary version, then the
// oldest, as kube-apiserver's compare; then, where kube-apiserver keeps
// whichever its cache listed first, by name.
func compare(a, b *coordinationv1beta1.LeaseCandidate) int {
	if c := emulationVersion(a).Compare(emulationVersion(b)); c != 0 {
		return c
	}
	if c := binaryVersion(a).Compare(binaryVersion(b)); c != 0 {
		return c
	}
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// validForOldest reports whether both versions of c parse (leniently, as
// kube-apiserver's semver.ParseTolerant).
func validForOldest(c *coordinationv1beta1.LeaseCandidate) bool {
	_, err1 := semver.ParseTolerant(c.Spec.EmulationVersion)
	_, err2 := semver.ParseTolerant(c.Spec.BinaryVersion)
	return err1 == nil && err2 == nil
}

func emulationVersion(c *coordinationv1beta1.LeaseCandidate) semver.Version {
	v, _ := semver.ParseTolerant(c.Spec.EmulationVersion)
	return v
}

func binaryVersion(c *coordinationv1beta1.LeaseCandidate) semver.Version {
	v, _ := semver.ParseTolerant(c.Spec.BinaryVersion)
	return v
}

// holderOf is the Lease's holder, "" when none.
func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// expired reports whether the Lease's term is over, as kube-apiserver
// judges it: no renewTime or duration, or renewTime+duration before now.
// The renewTime is the holder's clock and now the server's: they must
// agree to well within the lease duration.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	return l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil || expiry(l).Before(now)
}

// expiry is when the Lease's term ends; zero when it has none.
func expiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// newLease is a Lease the controller creates: held by holder ("" for
// none) for assignedLeaseSeconds from now.
func newLease(namespace, name string, strategy coordinationv1.CoordinatedLeaseStrategy, holder string, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{
			Strategy:             &strategy,
			LeaseDurationSeconds: ptr(assignedLeaseSeconds),
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
		l.Spec.LeaseTransitions = ptr(int32(0))
	}
	return l
}

// earliest returns the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

func ptr[T any](v T) *T { return &v }
