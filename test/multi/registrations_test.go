package multi

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/controllers/registrations"
)

// TestRegistrationsReplicas: with three replicas on etcd, one turns
// registration Leases into slices; when it is killed another takes over,
// keeps the live registration and drops the one that expired meanwhile.
func TestRegistrationsReplicas(t *testing.T) {
	d, acts := deployWatched(t, registrations.Name)
	createNamespaces(t, d, "reg")
	first := acts.waitRunning(t, -1)
	alive := d.others(first)
	c := d.clientFor(t, alive[0])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// "steady" is renewed every 500 ms throughout; "lapses" stops after
	// the kill.
	renewing := map[string]context.Context{"steady": ctx}
	lapseCtx, lapse := context.WithCancel(ctx)
	renewing["lapses"] = lapseCtx
	for i, name := range []string{"steady", "lapses"} {
		go renewRegistration(ctx, renewing[name], c, name, fmt.Sprintf("10.0.0.%d", i+1))
	}
	waitRegistered(t, d.clientFor(t, first), "10.0.0.1", "10.0.0.2")

	d.replicas[first].Kill(t)
	lapse()
	next := acts.waitRunning(t, first)
	t.Logf("the controller runs in %s after %s was killed", d.replicas[next].Name(), d.replicas[first].Name())
	waitRegistered(t, d.clientFor(t, alive[1]), "10.0.0.1")
	acts.check(t, len(d.replicas))
}

func renewRegistration(ctx, renewCtx context.Context, c kubernetes.Interface, name, ip string) {
	secs, holder := int32(3), name
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{registrations.LabelService: "api"},
			Annotations: map[string]string{registrations.AnnotationAddresses: ip, registrations.AnnotationPorts: "grpc:8080"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	for renewCtx.Err() == nil {
		var err error
		if l.ResourceVersion == "" {
			l, err = c.CoordinationV1().Leases("reg").Create(ctx, l, metav1.CreateOptions{})
		} else {
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			l, err = c.CoordinationV1().Leases("reg").Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			return
		}
		select {
		case <-renewCtx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitRegistered waits until service reg/api's slices hold exactly ips
// (sorted).
func waitRegistered(t testing.TB, c kubernetes.Interface, ips ...string) {
	t.Helper()
	waitUntil(t, time.Minute, fmt.Sprintf("api's slices to hold %v", ips), func() bool {
		list, err := c.DiscoveryV1().EndpointSlices("reg").List(context.Background(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=api",
		})
		if err != nil {
			return false
		}
		var got []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				got = append(got, e.Addresses...)
			}
		}
		slices.Sort(got)
		return slices.Equal(got, ips)
	})
}
