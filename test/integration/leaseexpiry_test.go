package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const expiryAnnotation = "leasehold.dev/delete-after-expiry"

func expiringLease(name, grace string, seconds int32, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("holder"),
			LeaseDurationSeconds: ptr(seconds),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
	if grace != "" {
		l.Annotations = map[string]string{expiryAnnotation: grace}
	}
	return l
}

func leaseExists(t testing.TB, c kubernetes.Interface, ns, name string) bool {
	t.Helper()
	_, err := c.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestLeaseDeleteAfterExpiry: a Lease annotated
// leasehold.dev/delete-after-expiry is deleted once the server has not
// seen it renewed for its duration plus the grace, judged by the
// server's clock whatever the holder's says; renewals keep it; others
// are never deleted.
func TestLeaseDeleteAfterExpiry(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	leases := c.CoordinationV1().Leases("default")
	now := time.Now()
	create := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		t.Helper()
		return must[*coordinationv1.Lease](t)(leases.Create(ctx, l, metav1.CreateOptions{}))
	}
	created := time.Now()
	create(expiringLease("plain", "", 1, now))
	past := create(expiringLease("clock-an-hour-behind", "0s", 2, now.Add(-time.Hour)))
	create(expiringLease("clock-an-hour-ahead", "0s", 1, now.Add(time.Hour)))
	create(expiringLease("grace", "2s", 1, now))
	create(expiringLease("not-a-duration", "soon", 1, now))
	renewed := create(expiringLease("renewed", "0s", 1, now))

	// The holder's clock says the first expired an hour ago: the server's
	// says it has 2 s.
	time.Sleep(time.Until(created.Add(time.Second)))
	if !leaseExists(t, c, "default", past.Name) {
		t.Fatalf("%s deleted within a second of its creation: judged by the holder's clock", past.Name)
	}
	if !leaseExists(t, c, "default", "grace") {
		t.Fatal("grace deleted before its duration and grace (3 s) passed")
	}
	// Renewed every 250 ms for 4 s, it lives.
	for range 16 {
		renewed.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		renewed = must[*coordinationv1.Lease](t)(leases.Update(ctx, renewed, metav1.UpdateOptions{}))
		time.Sleep(250 * time.Millisecond)
	}
	if !leaseExists(t, c, "default", "renewed") {
		t.Fatal("a lease renewed every 250 ms with a 1 s duration was deleted")
	}
	for _, name := range []string{"clock-an-hour-behind", "clock-an-hour-ahead", "grace", "renewed"} {
		waitFor(t, func() bool { return !leaseExists(t, c, "default", name) })
	}
	// Those that did not ask, or asked wrongly, stay.
	for _, name := range []string{"plain", "not-a-duration"} {
		if !leaseExists(t, c, "default", name) {
			t.Errorf("%s was deleted", name)
		}
	}
	waitEvent(t, c, "default", past.UID, "DeletedAfterExpiry")
	bad := must[*coordinationv1.Lease](t)(leases.Get(ctx, "not-a-duration", metav1.GetOptions{}))
	ev := waitEvent(t, c, "default", bad.UID, "InvalidDeleteAfterExpiry")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, `"soon" is not a duration`) {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
	raw := string(must[[]byte](t)(c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)))
	if !strings.Contains(raw, "leasehold_lease_expiry_deletions_total 4\n") {
		t.Errorf("/metrics lacks leasehold_lease_expiry_deletions_total 4")
	}
}

// TestLeaseExpiryLatency measures, over 100 opt-in leases that are never
// renewed, the time from their expiry (creation + duration, by the
// server's clock) to their deletion as a watch reports it; logged, for
// the docs.
func TestLeaseExpiryLatency(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	ns := "expiry"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	w := must[watch.Interface](t)(c.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{}))
	defer w.Stop()
	const n = 100
	var mu sync.Mutex
	expires := map[string]time.Time{}
	for i := range n {
		name := fmt.Sprintf("l-%03d", i)
		must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Create(ctx, expiringLease(name, "0s", 1, time.Now()), metav1.CreateOptions{}))
		mu.Lock()
		expires[name] = time.Now().Add(time.Second)
		mu.Unlock()
	}
	var late []time.Duration
	timeout := time.After(30 * time.Second)
	for len(late) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type != watch.Deleted {
				continue
			}
			name := ev.Object.(*coordinationv1.Lease).Name
			mu.Lock()
			late = append(late, time.Since(expires[name]))
			mu.Unlock()
		case <-timeout:
			t.Fatalf("%d of %d leases deleted after 30 s", len(late), n)
		}
	}
	slices.Sort(late)
	t.Logf("expiry to deletion over %d leases: p50 %v, p99 %v, max %v (negative: deleted before the client's estimate of expiry, which follows the server's)",
		n, late[n/2].Round(time.Millisecond), late[n*99/100-1].Round(time.Millisecond), late[n-1].Round(time.Millisecond))
}
