package lock

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// These tests run client-go's LeaderElector in-process against a real
// server, with fencedLock and, for comparison, with client-go's LeaseLock
// alone.

func testLogger() *slog.Logger {
	if os.Getenv("LEASEHOLD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testElection(cs kubernetes.Interface, name, identity string) Election {
	return Election{
		Leases:        cs.CoordinationV1(),
		Namespace:     "default",
		Name:          name,
		Identity:      identity,
		LeaseDuration: 2 * time.Second,
		RenewDeadline: time.Second,
		RetryPeriod:   50 * time.Millisecond,
		Logger:        testLogger(),
	}
}

// lead runs an elector on lock until it leads, and returns a function
// that stops it and waits for it (and so for its release).
func lead(t *testing.T, e Election, lock resourcelock.Interface) (stop func()) {
	t.Helper()
	led := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(led) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.electorContext(context.Background()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	select {
	case <-led:
	case <-time.After(30 * time.Second):
		t.Fatal("did not lead within 30s")
	}
	return stop
}

func createLease(t *testing.T, cs kubernetes.Interface, name, holder string, transitions int32, renewed time.Time) {
	t.Helper()
	at := metav1.NewMicroTime(renewed)
	_, err := cs.CoordinationV1().Leases("default").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](2),
			LeaseTransitions:     ptr.To(transitions),
			AcquireTime:          &at,
			RenewTime:            &at,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func getLease(t *testing.T, cs kubernetes.Interface, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTokenSameIdentity: a record naming this identity, from a process
// that crashed, is taken over by client-go without counting a transition;
// fencedLock counts one.
func TestTokenSameIdentity(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Client(t)
	for _, tc := range []struct {
		name    string
		renewed time.Time
	}{
		{"expired", time.Now().Add(-time.Hour)},
		{"still valid", time.Now()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, fenced := "plain-"+tc.name[:5], "fenced-"+tc.name[:5]
			createLease(t, cs, plain, "me", 5, tc.renewed)
			createLease(t, cs, fenced, "me", 5, tc.renewed)

			e := testElection(cs, plain, "me")
			lead(t, e, e.leaseLock())
			if n := *getLease(t, cs, plain).Spec.LeaseTransitions; n != 5 {
				t.Errorf("client-go alone: leaseTransitions %d; this test assumes it keeps 5", n)
			}

			e = testElection(cs, fenced, "me")
			fl := newFencedLock(e.leaseLock(), e.Logger, 0, nil)
			lead(t, e, fl)
			if st := fl.state(); st.token != 6 {
				t.Errorf("token %d, want 6", st.token)
			}
			if n := *getLease(t, cs, fenced).Spec.LeaseTransitions; n != 6 {
				t.Errorf("leaseTransitions %d, want 6", n)
			}
		})
	}
}

// TestTokenNewLease: the first acquisition, which creates the lease, gets
// token 1 (client-go writes 0), and a lease deleted and created again by a
// process that saw it counts on from what it saw.
func TestTokenNewLease(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Client(t)
	e := testElection(cs, "new", "first")
	fl := newFencedLock(e.leaseLock(), e.Logger, 0, nil)
	stop := lead(t, e, fl)
	if st := fl.state(); st.token != 1 {
		t.Errorf("first token %d, want 1", st.token)
	}
	stop()

	// A waiter sees the lease held, with 7 transitions; it is deleted;
	// the waiter creates it again.
	if err := cs.CoordinationV1().Leases("default").Delete(context.Background(), "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createLease(t, cs, "new", "other", 7, time.Now())
	e = testElection(cs, "new", "waiter")
	fl = newFencedLock(e.leaseLock(), e.Logger, 0, nil)
	deleted := make(chan struct{})
	go func() {
		defer close(deleted)
		for fl.state().high != 7 {
			time.Sleep(10 * time.Millisecond)
		}
		_ = cs.CoordinationV1().Leases("default").Delete(context.Background(), "new", metav1.DeleteOptions{})
	}()
	lead(t, e, fl)
	<-deleted
	if st := fl.state(); st.token != 8 {
		t.Errorf("token after the lease was created again %d, want 8", st.token)
	}
}

// TestNoRelease: fencedLock refuses client-go's release while the command
// may run, and never clears a record that names another holder.
func TestNoRelease(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Client(t)

	e := testElection(cs, "running", "me")
	fl := newFencedLock(e.leaseLock(), e.Logger, 0, nil)
	stop := lead(t, e, fl)
	if !fl.beginCommand() {
		t.Fatal("beginCommand refused while leading")
	}
	stop()
	if h := ptr.Deref(getLease(t, cs, "running").Spec.HolderIdentity, ""); h != "me" {
		t.Errorf("holder %q after a release while the command runs, want me", h)
	}
	select {
	case <-fl.lost:
	default:
		t.Error("a release while the command runs did not count as losing the lease")
	}

	e = testElection(cs, "taken", "me")
	fl = newFencedLock(e.leaseLock(), e.Logger, 0, nil)
	stop = lead(t, e, fl)
	patch := []byte(`{"spec":{"holderIdentity":"other"}}`)
	if _, err := cs.CoordinationV1().Leases("default").Patch(context.Background(), "taken", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stop() // at once: client-go may not have seen the change
	if h := ptr.Deref(getLease(t, cs, "taken").Spec.HolderIdentity, ""); h != "other" {
		t.Errorf("holder %q after releasing a lease another took, want other", h)
	}
}
