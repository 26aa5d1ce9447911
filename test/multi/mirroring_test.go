package multi

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/controllers/endpointslicemirroring"
)

// TestMirroringReplicas: with three replicas on etcd, one mirrors
// Endpoints into EndpointSlices, whichever replica the Endpoints were
// written through; when it is killed another takes over and mirrors the
// changes made meanwhile. From the replicas' logs: the controller ran in
// one replica at a time, and every write came from the replica running
// it then.
func TestMirroringReplicas(t *testing.T) {
	d, acts := deployWatched(t, endpointslicemirroring.Name)
	createNamespaces(t, d, "mirror")
	first := acts.waitRunning(t, -1)
	t.Logf("the controller runs in %s", d.replicas[first].Name())

	// Endpoints written through each replica are all mirrored.
	for i := range d.replicas {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.0.0.%d", i+1)}}}},
		}
		if _, err := d.clientFor(t, i).CoreV1().Endpoints("mirror").Create(context.Background(), ep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range d.replicas {
		waitSlice(t, d.clientFor(t, (i+1)%len(d.replicas)), fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.0.0.%d", i+1))
	}

	d.replicas[first].Kill(t)
	killed := time.Now()
	alive := d.others(first)
	// Changed while no replica may be mirroring: the next one finds it.
	c := d.clientFor(t, alive[0])
	ep, err := c.CoreV1().Endpoints("mirror").Get(context.Background(), "svc-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep.Subsets[0].Addresses[0].IP = "10.0.1.1"
	if _, err := c.CoreV1().Endpoints("mirror").Update(context.Background(), ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next := acts.waitRunning(t, first)
	t.Logf("the controller runs in %s, %v after %s was killed", d.replicas[next].Name(), time.Since(killed).Round(time.Millisecond), d.replicas[first].Name())
	waitSlice(t, d.clientFor(t, alive[1]), "svc-0", "10.0.1.1")
	acts.check(t, len(d.replicas))
}

// waitSlice waits until the Endpoints mirror/name is mirrored to one
// slice holding just ip.
func waitSlice(t testing.TB, c kubernetes.Interface, name, ip string) {
	t.Helper()
	waitUntil(t, time.Minute, "the slice of "+name+" to hold "+ip, func() bool {
		list, err := c.DiscoveryV1().EndpointSlices("mirror").List(context.Background(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + name,
		})
		return err == nil && len(list.Items) == 1 && len(list.Items[0].Endpoints) == 1 && list.Items[0].Endpoints[0].Addresses[0] == ip
	})
}
