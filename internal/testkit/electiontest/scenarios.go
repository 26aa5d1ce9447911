package electiontest

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/controllers/election"
)

// Env is where a scenario runs.
type Env struct {
	// Client returns the client of the i-th candidate (with several
	// replicas, spread over them).
	Client func(i int) kubernetes.Interface
	// Namespace is created for the scenario.
	Namespace string
	// Slack covers request latencies in every bound; the process's
	// measured stalls are added to it.
	Slack time.Duration
}

// ScenarioTiming is the client-go timing of the scenarios' candidates.
var ScenarioTiming = Timing{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}

// waitTimeout bounds every wait of a scenario; the bounds checked are
// much tighter.
const waitTimeout = time.Minute

func (e Env) setUp(t *testing.T) *Stalls {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	if _, err := e.Client(0).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stalls := StartStalls()
	t.Cleanup(stalls.Stop)
	return stalls
}

// Measured is how long a handover took and its bound.
type Measured struct {
	What         string
	Took, Bound  time.Duration
	Stalled      time.Duration
	From, Leader string
}

// check fails the test when m exceeds its bound plus slack and stalls,
// and logs it.
func (e Env) check(t *testing.T, m Measured) Measured {
	t.Helper()
	limit := m.Bound + e.Slack + m.Stalled
	t.Logf("%s: %v (bound %v + slack %v + stalls %v)", m.What, m.Took.Round(time.Millisecond), m.Bound, e.Slack, m.Stalled.Round(time.Millisecond))
	if m.Took > limit {
		t.Errorf("%s took %v, more than its bound %v + slack %v + stalls %v", m.What, m.Took, m.Bound, e.Slack, m.Stalled)
	}
	return m
}

// waitLeading waits until who leads (by its callbacks) and the Lease
// names it holder without a preferredHolder, and returns when its term
// started.
func waitLeading(t *testing.T, h *History, terms *Terms, from int, who string) (time.Time, int) {
	t.Helper()
	i := h.WaitFor(t, from, waitTimeout, who+" holds the lease", func(l *coordinationv1.Lease) bool {
		_, leading := terms.Leading(who)
		return Holder(l) == who && Preferred(l) == "" && leading
	})
	deadline := time.Now().Add(waitTimeout)
	for {
		if tm, ok := terms.Leading(who); ok {
			return tm.Start, i
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds the lease but does not lead", who)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Handovers runs three candidates of different binary and emulation
// versions, which must end with the one the server picks; stops the
// holder, whose lease must pass to the next best; adds a better
// candidate, to which the holder must hand over through preferredHolder;
// then adds a better one still that goes away after being made
// preferredHolder, which must not stall the lease. Never two holders at
// once, from the Lease's watch history. It returns the handover times.
func Handovers(t *testing.T, e Env) []Measured {
	stalls := e.setUp(t)
	const lease = "controller"
	h := Watch(t, e.Client(0), e.Namespace, lease)
	defer h.Stop()
	terms := &Terms{}
	tm := ScenarioTiming
	var all []*Candidate
	defer func() {
		for _, c := range all {
			c.Stop()
		}
	}()
	start := func(name, binary, emulation string, noElector bool) *Candidate {
		c := Start(t, Config{
			Client: e.Client(len(all)), Namespace: e.Namespace, Lease: lease, Name: name,
			BinaryVersion: binary, EmulationVersion: emulation, Timing: tm,
			ReleaseOnCancel: true, NoElector: noElector, Terms: terms,
		})
		all = append(all, c)
		return c
	}
	var out []Measured

	// c has the oldest emulation version, and then the oldest binary.
	begin := time.Now()
	start("a", "1.36.0", "1.36.0", false)
	start("b", "1.36.0", "1.35.0", false)
	c := start("c", "1.35.0", "1.35.0", false)
	since, i := waitLeading(t, h, terms, 0, "c")
	t.Logf("c leads %v after the candidates started", since.Sub(begin).Round(time.Millisecond))

	// Stopping c releases the lease. Proof of life from before the
	// release does not count, so every candidate is pinged; c, the best,
	// cannot answer, and the election waits PingTimeout for it, then
	// names b, which takes the lease at its next poll.
	c.Stop()
	since, i = waitLeading(t, h, terms, i, "b")
	out = append(out, e.check(t, Measured{
		What: "holder stopped: b leads", From: "c", Leader: "b",
		Took: since.Sub(c.Stopped), Bound: election.PingTimeout + tm.MaxPoll(),
		Stalled: stalls.Within(c.Stopped, since),
	}))

	// d is better than b: the controller names it preferredHolder; b sees
	// that at its next renewal (RetryPeriod), fails to renew for
	// RenewDeadline, releases; d answers a ping and is named holder, and
	// takes the lease at its next poll.
	joined := time.Now()
	start("d", "1.36.0", "1.34.0", false)
	h.WaitFor(t, i, waitTimeout, "preferredHolder d", func(l *coordinationv1.Lease) bool { return Preferred(l) == "d" })
	since, i = waitLeading(t, h, terms, i, "d")
	out = append(out, e.check(t, Measured{
		What: "better candidate joined: d leads", From: "b", Leader: "d",
		Took: since.Sub(joined), Bound: tm.RetryPeriod + tm.RenewDeadline + tm.MaxPoll(),
		Stalled: stalls.Within(joined, since),
	}))

	// x, better still, never takes the lease (no elector), and goes away
	// once named preferredHolder: its process stops and its
	// LeaseCandidate is deleted. The controller clears preferredHolder,
	// and d keeps the lease (or, if it had already let go, gets it back).
	x := start("x", "1.36.0", "1.33.0", true)
	j := h.WaitFor(t, i, waitTimeout, "preferredHolder x", func(l *coordinationv1.Lease) bool { return Preferred(l) == "x" })
	x.Stop()
	gone := time.Now()
	x.Delete(t)
	k := h.WaitFor(t, j, waitTimeout, "d holds the lease, no preferredHolder", func(l *coordinationv1.Lease) bool {
		_, leading := terms.Leading("d")
		return Holder(l) == "d" && Preferred(l) == "" && leading
	})
	settled := h.Versions()[k].Seen
	out = append(out, e.check(t, Measured{
		What: "preferred holder gone: d holds the lease", From: "d", Leader: "d",
		Took: settled.Sub(gone), Bound: tm.RetryPeriod + tm.MaxPoll(),
		Stalled: stalls.Within(gone, settled),
	}))
	h.CheckOneHolder(t)
	return out
}

// PreferredHolderGone is the stall kube-apiserver 1.36 does not leave:
// candidates that do not release the lease, a holder told to hand over
// to a preferredHolder whose process then stops. The holder stops
// renewing and the lease expires naming it; the best candidate that
// still answers is that same holder, and kube-apiserver, seeing no
// change of holder to make, leaves the lease expired, which client-go
// never renews. Here the lease is handed to the holder again once the
// preferred holder's ping times out.
func PreferredHolderGone(t *testing.T, e Env) Measured {
	stalls := e.setUp(t)
	const lease = "stall"
	h := Watch(t, e.Client(0), e.Namespace, lease)
	defer h.Stop()
	terms := &Terms{}
	tm := ScenarioTiming
	var all []*Candidate
	defer func() {
		for _, c := range all {
			c.Stop()
		}
	}()
	start := func(name, binary, emulation string, noElector bool) *Candidate {
		c := Start(t, Config{
			Client: e.Client(len(all)), Namespace: e.Namespace, Lease: lease, Name: name,
			BinaryVersion: binary, EmulationVersion: emulation, Timing: tm,
			NoElector: noElector, Terms: terms,
		})
		all = append(all, c)
		return c
	}
	start("a", "1.36.0", "1.35.0", false)
	start("b", "1.36.0", "1.36.0", false)
	_, i := waitLeading(t, h, terms, 0, "a")

	p := start("p", "1.36.0", "1.34.0", true)
	i = h.WaitFor(t, i, waitTimeout, "preferredHolder p", func(l *coordinationv1.Lease) bool { return Preferred(l) == "p" })
	p.Stop() // its LeaseCandidate stays, unanswering

	// a stops renewing; the lease expires still naming a, and p as
	// preferredHolder.
	deadline := time.Now().Add(waitTimeout)
	for _, leading := terms.Leading("a"); leading; _, leading = terms.Leading("a") {
		if time.Now().After(deadline) {
			t.Fatalf("a still leads with p preferred\n%s", h.Describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
	i = h.Len() - 1
	last := h.Versions()[i].Lease
	if Holder(last) != "a" || Preferred(last) != "p" {
		t.Fatalf("a stopped leading, but the lease is not a's with p preferred:\n%s", h.Describe())
	}
	expires := Expiry(last)
	// The controller looks at expiry, pings a, b and p, waits PingTimeout
	// for p (the best), then names a holder again; a's elector takes it
	// at its next poll.
	since, _ := waitLeading(t, h, terms, i, "a")
	m := e.check(t, Measured{
		What: "expired lease, preferred holder gone: a leads again", From: "a", Leader: "a",
		Took: since.Sub(expires), Bound: election.PingTimeout + tm.MaxPoll(),
		Stalled: stalls.Within(expires, since),
	})
	p.Delete(t)
	h.CheckOneHolder(t)
	return m
}
