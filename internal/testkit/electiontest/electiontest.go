// Package electiontest runs client-go candidates of coordinated leader
// election against a real server and checks what they and the Lease did.
// Only tests import it.
package electiontest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Timing is a candidate's client-go leader election timing.
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// MaxPoll is the longest a client-go candidate that does not lead waits
// between two looks at the Lease: RetryPeriod stretched by client-go's
// jitter (wait.JitterUntil with JitterFactor), counted from the end of
// the previous look.
func (t Timing) MaxPoll() time.Duration {
	return time.Duration((1 + leaderelection.JitterFactor) * float64(t.RetryPeriod))
}

// Config describes one candidate process.
type Config struct {
	Client           kubernetes.Interface
	Namespace, Lease string
	// Name is the LeaseCandidate's name and the elector's identity.
	Name                            string
	BinaryVersion, EmulationVersion string
	Timing                          Timing
	// ReleaseOnCancel releases the Lease when the candidate stops or
	// loses it (client-go's option).
	ReleaseOnCancel bool
	// NoElector runs the LeaseCandidate only: a candidate that never
	// takes the Lease, even when elected.
	NoElector bool
	// Terms records the candidate's terms.
	Terms *Terms
}

// Candidate is one running candidate process: client-go's LeaseCandidate
// for Config.Lease, and a LeaderElector with Coordinated set that runs
// again under the same identity whenever its term ends, as a process
// restarted by its supervisor would.
type Candidate struct {
	cfg    Config
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Stopped is when Stop was called.
	Stopped time.Time
}

// Start starts a candidate; it stops at Stop or when the test ends.
func Start(t testing.TB, cfg Config) *Candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Candidate{cfg: cfg, cancel: cancel}
	lc, waiter, err := leaderelection.NewCandidate(cfg.Client, cfg.Namespace, cfg.Name, cfg.Lease,
		cfg.BinaryVersion, cfg.EmulationVersion, coordinationv1.OldestEmulationVersion)
	if err != nil {
		t.Fatal(err)
	}
	c.wg.Go(func() { lc.Run(ctx) })
	waiter.WaitForCacheSync(ctx.Done())
	if !cfg.NoElector {
		c.wg.Go(func() {
			for ctx.Err() == nil {
				c.elect(ctx)
			}
		})
	}
	t.Cleanup(c.Stop)
	return c
}

// elect runs one leader elector until its term ends or ctx does.
func (c *Candidate) elect(ctx context.Context) {
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.cfg.Namespace, Name: c.cfg.Lease},
			Client:     c.cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.cfg.Name},
		},
		LeaseDuration:   c.cfg.Timing.LeaseDuration,
		RenewDeadline:   c.cfg.Timing.RenewDeadline,
		RetryPeriod:     c.cfg.Timing.RetryPeriod,
		ReleaseOnCancel: c.cfg.ReleaseOnCancel,
		Coordinated:     true,
		Name:            c.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { c.cfg.Terms.started(c.cfg.Name) },
			OnStoppedLeading: func() { c.cfg.Terms.stopped(c.cfg.Name) },
		},
	})
	if err != nil {
		panic(err) // the tests' timings are valid
	}
	le.Run(ctx)
}

// Stop stops the candidate as its process would stop: the elector ends
// (releasing a Lease it holds if ReleaseOnCancel), and so does the
// LeaseCandidate, which stays behind. Safe to call twice.
func (c *Candidate) Stop() {
	if c.Stopped.IsZero() {
		c.Stopped = time.Now()
	}
	c.cancel()
	c.wg.Wait()
}

// Delete deletes the candidate's LeaseCandidate.
func (c *Candidate) Delete(t testing.TB) {
	t.Helper()
	err := c.cfg.Client.CoordinationV1beta1().LeaseCandidates(c.cfg.Namespace).Delete(t.Context(), c.cfg.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// Term is one leadership term as a candidate's callbacks saw it.
type Term struct {
	Who        string
	Start, End time.Time // End zero while leading
}

// Terms records the terms of the candidates of one Lease.
type Terms struct {
	mu    sync.Mutex // guards terms
	terms []Term
}

func (r *Terms) started(who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terms = append(r.terms, Term{Who: who, Start: time.Now()})
}

// stopped ends who's open term; client-go calls OnStoppedLeading on every
// exit of Run, also when it never led.
func (r *Terms) stopped(who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.terms) - 1; i >= 0; i-- {
		if r.terms[i].Who == who && r.terms[i].End.IsZero() {
			r.terms[i].End = time.Now()
			return
		}
	}
}

// Leading returns the open term of who, if any.
func (r *Terms) Leading(who string) (Term, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.terms) - 1; i >= 0; i-- {
		if r.terms[i].Who == who && r.terms[i].End.IsZero() {
			return r.terms[i], true
		}
	}
	return Term{}, false
}

// All returns every term so far.
func (r *Terms) All() []Term {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Term(nil), r.terms...)
}

// Version is one state of the Lease as its watch delivered it.
type Version struct {
	Lease *coordinationv1.Lease // nil: deleted
	// Seen is when the watch delivered it.
	Seen time.Time
}

// History records every state of one Lease, from a watch.
type History struct {
	namespace, name string

	mu       sync.Mutex // guards versions
	versions []Version
	changed  chan struct{} // closed and replaced at every version

	cancel context.CancelFunc
	done   chan struct{}
}

// Watch starts recording the Lease namespace/name, which need not exist
// yet; it stops when the test ends.
func Watch(t testing.TB, client kubernetes.Interface, namespace, name string) *History {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &History{namespace: namespace, name: name, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	leases := client.CoordinationV1().Leases(namespace)
	list, err := leases.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		h.add(&list.Items[i])
	}
	rv := list.ResourceVersion
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("watching lease %s/%s: %v", namespace, name, err)
				}
				return
			}
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				rv = l.ResourceVersion
				switch ev.Type {
				case watch.Deleted:
					h.add(nil)
				case watch.Added, watch.Modified:
					h.add(l)
				}
			}
		}
	}()
	t.Cleanup(h.Stop)
	return h
}

func (h *History) add(l *coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.versions = append(h.versions, Version{Lease: l, Seen: time.Now()})
	close(h.changed)
	h.changed = make(chan struct{})
}

// Stop stops recording.
func (h *History) Stop() {
	h.cancel()
	<-h.done
}

// Versions returns the states recorded so far.
func (h *History) Versions() []Version {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Version(nil), h.versions...)
}

// WaitFor waits until a recorded state from index from on satisfies cond
// and returns its index, failing the test after timeout.
func (h *History) WaitFor(t testing.TB, from int, timeout time.Duration, what string, cond func(*coordinationv1.Lease) bool) int {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		for i := from; i < len(h.versions); i++ {
			if l := h.versions[i].Lease; l != nil && cond(l) {
				h.mu.Unlock()
				return i
			}
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for lease %s/%s: %s\n%s", timeout, h.namespace, h.name, what, h.Describe())
		}
	}
}

// Len is how many states are recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.versions)
}

// Holder returns the holder of l, "" when none.
func Holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Preferred returns the preferredHolder of l, "" when none.
func Preferred(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.PreferredHolder == nil {
		return ""
	}
	return *l.Spec.PreferredHolder
}

// Expiry is when l's term ends as kube-apiserver judges it (renewTime +
// leaseDurationSeconds); zero when it has none.
func Expiry(l *coordinationv1.Lease) time.Time {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// CheckOneHolder checks from the recorded history that the Lease never
// had two holders at once: whenever it passes from one holder to
// another, without a release between, the new holder's first state was
// written (its renewTime: the controller's clock when it named it) at or
// after the old holder's term ended (its last renewTime plus its
// leaseDurationSeconds).
func (h *History) CheckOneHolder(t testing.TB) {
	t.Helper()
	vs := h.Versions()
	for i := 1; i < len(vs); i++ {
		prev, cur := vs[i-1].Lease, vs[i].Lease
		a, b := Holder(prev), Holder(cur)
		if a == "" || b == "" || a == b {
			continue
		}
		end := Expiry(prev)
		if cur.Spec.RenewTime == nil || (!end.IsZero() && cur.Spec.RenewTime.Time.Before(end)) {
			t.Errorf("lease %s/%s passed from %s to %s at version %d before %s's term ended (%v):\n%s",
				h.namespace, h.name, a, b, i, a, end.Format(time.StampMicro), h.Describe())
		}
	}
}

// Describe renders the history, one state a line.
func (h *History) Describe() string {
	var b strings.Builder
	for i, v := range h.Versions() {
		l := v.Lease
		if l == nil {
			fmt.Fprintf(&b, "%3d %s deleted\n", i, v.Seen.Format(time.StampMilli))
			continue
		}
		renew, dur := "-", "-"
		if l.Spec.RenewTime != nil {
			renew = l.Spec.RenewTime.Format(time.StampMilli)
		}
		if l.Spec.LeaseDurationSeconds != nil {
			dur = fmt.Sprint(*l.Spec.LeaseDurationSeconds)
		}
		trans := "-"
		if l.Spec.LeaseTransitions != nil {
			trans = fmt.Sprint(*l.Spec.LeaseTransitions)
		}
		fmt.Fprintf(&b, "%3d seen %s rv %s holder %q preferred %q renew %s dur %s transitions %s\n",
			i, v.Seen.Format(time.StampMilli), l.ResourceVersion, Holder(l), Preferred(l), renew, dur, trans)
	}
	return b.String()
}
