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
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func registrationLease(name, service, addr string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"leasehold.dev/service": service},
			Annotations: map[string]string{"leasehold.dev/addresses": addr, "leasehold.dev/ports": "grpc:8080", "leasehold.dev/zone": "z1"},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr(name + "-holder"),
			LeaseDurationSeconds: ptr[int32](2),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
}

// registered returns the ready addresses in service's slices, sorted.
func registered(t testing.TB, c kubernetes.Interface, ns, service string) []string {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service + "," + discoveryv1.LabelManagedBy + "=registrations.leasehold.dev",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRegistrations: held, unexpired registration Leases are endpoints
// of their service's slices, judged by the server's clock; one that
// stops renewing leaves at its expiry and comes back when renewed; a
// released or deleted one leaves.
func TestRegistrations(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	ns := "reg"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	leases := c.CoordinationV1().Leases(ns)
	var mu sync.Mutex
	held := map[string]*coordinationv1.Lease{}
	for i, skew := range []time.Duration{0, -time.Hour, time.Hour} {
		name := fmt.Sprintf("api-%d", i)
		held[name] = must[*coordinationv1.Lease](t)(leases.Create(ctx, registrationLease(name, "api", fmt.Sprintf("10.0.0.%d", i+1), time.Now().Add(skew)), metav1.CreateOptions{}))
	}
	want := func(addrs ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Equal(registered(t, c, ns, "api"), addrs) {
			if time.Now().After(deadline) {
				t.Fatalf("registered %v, want %v", registered(t, c, ns, "api"), addrs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Clocks an hour off either way: judged by the server's.
	want("10.0.0.1", "10.0.0.2", "10.0.0.3")

	// Holders renew every 300 ms, api-2's until told to stop.
	stop := map[string]chan struct{}{}
	var wg sync.WaitGroup
	renew := func(name string) {
		stop[name] = make(chan struct{})
		wg.Add(1)
		go func(done chan struct{}) {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-time.After(300 * time.Millisecond):
				}
				mu.Lock()
				l := held[name].DeepCopy()
				mu.Unlock()
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
				if err != nil {
					t.Errorf("renewing %s: %v", name, err)
					return
				}
				mu.Lock()
				held[name] = out
				mu.Unlock()
			}
		}(stop[name])
	}
	for _, name := range []string{"api-0", "api-1", "api-2"} {
		renew(name)
	}
	defer func() {
		for _, ch := range stop {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		wg.Wait()
	}()
	time.Sleep(3 * time.Second) // past every lease's first 2 s
	want("10.0.0.1", "10.0.0.2", "10.0.0.3")

	close(stop["api-2"])
	stopped := time.Now()
	want("10.0.0.1", "10.0.0.2")
	if d := time.Since(stopped); d > 4*time.Second {
		t.Errorf("api-2 left %v after its last renewal, want within its 2 s and a second", d)
	} else {
		t.Logf("api-2 left %v after its last renewal (2 s lease)", d.Round(time.Millisecond))
	}
	renew("api-2")
	want("10.0.0.1", "10.0.0.2", "10.0.0.3")

	// Released: no holder, no endpoint.
	close(stop["api-1"])
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	l := held["api-1"].DeepCopy()
	mu.Unlock()
	l.Spec.HolderIdentity = nil
	must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{}))
	want("10.0.0.1", "10.0.0.3")

	// A registration that says no address gets an Event saying so.
	bad := registrationLease("api-bad", "api", "not-an-ip", time.Now())
	bad = must[*coordinationv1.Lease](t)(leases.Create(ctx, bad, metav1.CreateOptions{}))
	ev := waitEvent(t, c, ns, bad.UID, "InvalidRegistration")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, `"not-an-ip" is no IP address`) {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}

	// Deleted: gone at once.
	close(stop["api-0"])
	time.Sleep(400 * time.Millisecond)
	if err := leases.Delete(ctx, "api-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("10.0.0.3")
}
