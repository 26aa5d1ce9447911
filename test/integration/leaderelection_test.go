package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// leadership records who led when, to check that terms never overlap.
type leadership struct {
	mu    sync.Mutex
	terms []term
}

type term struct {
	who        string
	start, end time.Time // end zero while leading
}

func (l *leadership) started(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms = append(l.terms, term{who: who, start: time.Now()})
}

// ended closes who's open term at t.
func (l *leadership) ended(who string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.terms) - 1; i >= 0; i-- {
		if l.terms[i].who == who && l.terms[i].end.IsZero() {
			l.terms[i].end = t
			return
		}
	}
}

func (l *leadership) leader() (string, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.terms) - 1; i >= 0; i-- {
		if l.terms[i].end.IsZero() {
			return l.terms[i].who, l.terms[i].start, true
		}
	}
	return "", time.Time{}, false
}

func TestLeaderElection(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	const (
		leaseDuration = 2 * time.Second
		renewDeadline = 1500 * time.Millisecond
		retryPeriod   = 250 * time.Millisecond
	)
	var record leadership
	type candidate struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	candidates := map[string]*candidate{}
	for i := range 3 {
		id := fmt.Sprintf("candidate-%d", i)
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: "leader", Namespace: "kube-system"},
			Client:     s.ProtoClient(t).CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &candidate{cancel: cancel, done: make(chan struct{})}
		candidates[id] = c
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: leaseDuration,
			RenewDeadline: renewDeadline,
			RetryPeriod:   retryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { record.started(id) },
				OnStoppedLeading: func() { record.ended(id, time.Now()) },
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() { defer close(c.done); le.Run(ctx) }()
	}
	t.Cleanup(func() {
		for _, c := range candidates {
			c.cancel()
			<-c.done
		}
	})

	leases := s.Client(t).CoordinationV1().Leases("kube-system")
	var kills []time.Time
	for round := range 3 {
		var who string
		waitFor(t, func() bool {
			var ok bool
			who, _, ok = record.leader()
			return ok
		})
		// Kill the leader as a crash would: it stops renewing and never
		// releases the lease.
		killedAt := time.Now()
		kills = append(kills, killedAt)
		c := candidates[who]
		c.cancel()
		<-c.done
		record.ended(who, killedAt) // a crashed leader's term ends when it dies
		delete(candidates, who)
		dead := must[*coordinationv1.Lease](t)(leases.Get(t.Context(), "leader", metav1.GetOptions{}))
		if len(candidates) == 0 {
			break
		}
		var next string
		var since time.Time
		waitFor(t, func() bool {
			var ok bool
			next, since, ok = record.leader()
			return ok && next != who
		})
		// client-go followers count the lease duration from when they saw
		// the last renewal, and poll every retryPeriod*[1, 1+JitterFactor]:
		// the new leader acquires at most leaseDuration plus two such polls
		// after the dead leader's last renewal. The server adds only its
		// request latency.
		l := must[*coordinationv1.Lease](t)(leases.Get(t.Context(), "leader", metav1.GetOptions{}))
		took := l.Spec.AcquireTime.Sub(dead.Spec.RenewTime.Time)
		bound := leaseDuration + time.Duration(2*(1+leaderelection.JitterFactor)*float64(retryPeriod))
		if took > bound+100*time.Millisecond || took < leaseDuration {
			t.Errorf("round %d: %s acquired %v after %s's last renewal, want within [%v, %v]", round, next, took, who, leaseDuration, bound)
		}
		t.Logf("round %d: takeover %v after the last renewal (%v after the kill)", round, took.Round(time.Millisecond), since.Sub(killedAt).Round(time.Millisecond))
		if *l.Spec.HolderIdentity != next || *l.Spec.LeaseTransitions != int32(round+1) {
			t.Errorf("round %d: lease held by %v with %d transitions, want %s and %d", round, *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions, next, round+1)
		}
	}

	// Never two leaders at once.
	record.mu.Lock()
	defer record.mu.Unlock()
	for i, a := range record.terms {
		for _, b := range record.terms[i+1:] {
			aEnd := a.end
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if b.start.Before(aEnd) && a.start.Before(b.start) {
				t.Errorf("%s started leading at %v while %s led (%v - %v)", b.who, b.start, a.who, a.start, a.end)
			}
		}
	}
	if len(record.terms) < 3 {
		t.Errorf("only %d leadership terms: %+v", len(record.terms), record.terms)
	}
}
