package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const mirrorManager = "endpointslicemirroring-controller.k8s.io"

// mirroredSlices lists the slices mirrored for the Endpoints ns/name, by
// address type.
func mirroredSlices(t testing.TB, c kubernetes.Interface, ns, name string) map[discoveryv1.AddressType]discoveryv1.EndpointSlice {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name + "," + discoveryv1.LabelManagedBy + "=" + mirrorManager,
	})
	if err != nil {
		t.Fatalf("listing slices: %v", err)
	}
	out := map[discoveryv1.AddressType]discoveryv1.EndpointSlice{}
	for _, s := range list.Items {
		if _, dup := out[s.AddressType]; dup {
			t.Logf("two %s slices mirror %s/%s", s.AddressType, ns, name)
		}
		out[s.AddressType] = s
	}
	return out
}

// addresses renders a slice's endpoints as "IP" or "IP(not ready)", in
// order.
func addresses(s discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		a := strings.Join(e.Addresses, ",")
		if e.Conditions.Ready == nil || !*e.Conditions.Ready {
			a += "(not ready)"
		}
		out = append(out, a)
	}
	return out
}

// waitMirrored waits until the Endpoints ns/name is mirrored as want
// (address type to addresses) and returns the slices.
func waitMirrored(t testing.TB, c kubernetes.Interface, ns, name string, want map[discoveryv1.AddressType][]string) map[discoveryv1.AddressType]discoveryv1.EndpointSlice {
	t.Helper()
	var got map[discoveryv1.AddressType]discoveryv1.EndpointSlice
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = mirroredSlices(t, c, ns, name)
		have := map[discoveryv1.AddressType][]string{}
		for at, s := range got {
			have[at] = addresses(s)
		}
		diff := cmp.Diff(want, have)
		if diff == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s not mirrored within 20 s (-want +got):\n%s", ns, name, diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndpointSliceMirroring: every Endpoints is mirrored into
// EndpointSlices as kube-controller-manager's endpointslicemirroring
// controller mirrors those of selectorless Services; each rule of the
// controller through client-go, on the engine the suite runs on.
func TestEndpointSliceMirroring(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	ns := "mirror"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	eps := c.CoreV1().Endpoints(ns)
	slicesAPI := c.DiscoveryV1().EndpointSlices(ns)

	ep := must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				"team":                                "blue",
				corev1.LastAppliedConfigAnnotation:    "{}",
				corev1.EndpointsLastChangeTriggerTime: "2026-11-28T00:00:00Z",
			},
		},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "10.0.0.2", Hostname: "b", NodeName: ptr("node-1")}, {IP: "10.0.0.1"}, {IP: "fd00::1"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 80, AppProtocol: ptr("http")}},
		}},
	}, metav1.CreateOptions{}))

	t.Run("mirrored", func(t *testing.T) {
		got := waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.0.1", "10.0.0.2", "10.0.0.3(not ready)"},
			discoveryv1.AddressTypeIPv6: {"fd00::1"},
		})
		s := got[discoveryv1.AddressTypeIPv4]
		if !strings.HasPrefix(s.Name, "web-") || s.GenerateName != "web-" {
			t.Errorf("name %q generateName %q, want web-xxxxx from web-", s.Name, s.GenerateName)
		}
		wantLabels := map[string]string{"app": "web", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: mirrorManager}
		if diff := cmp.Diff(wantLabels, s.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"team": "blue"}, s.Annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
		wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: "web", UID: ep.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
		if diff := cmp.Diff(wantOwner, s.OwnerReferences); diff != "" {
			t.Errorf("ownerReferences (-want +got):\n%s", diff)
		}
		wantPorts := []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](80), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("http")}}
		if diff := cmp.Diff(wantPorts, s.Ports); diff != "" {
			t.Errorf("ports (-want +got):\n%s", diff)
		}
		b := s.Endpoints[1]
		if b.Hostname == nil || *b.Hostname != "b" || b.NodeName == nil || *b.NodeName != "node-1" {
			t.Errorf("hostname and nodeName not mirrored: %+v", b)
		}
	})

	t.Run("updates follow", func(t *testing.T) {
		before := mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv4]
		cur := must[*corev1.Endpoints](t)(eps.Get(ctx, "web", metav1.GetOptions{}))
		cur.Subsets[0].Addresses = cur.Subsets[0].Addresses[1:] // 10.0.0.1 and fd00::1 stay
		cur.Labels["tier"] = "front"
		must[*corev1.Endpoints](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
		got := waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.0.1", "10.0.0.3(not ready)"},
			discoveryv1.AddressTypeIPv6: {"fd00::1"},
		})
		after := got[discoveryv1.AddressTypeIPv4]
		if after.Name != before.Name {
			t.Errorf("the slice was replaced (%s, then %s), not updated", before.Name, after.Name)
		}
		waitFor(t, func() bool {
			return mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv6].Labels["tier"] == "front"
		})
	})

	t.Run("drift is put back", func(t *testing.T) {
		s := mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv4]
		s.Endpoints = s.Endpoints[:1]
		delete(s.Labels, "app")
		must[*discoveryv1.EndpointSlice](t)(slicesAPI.Update(ctx, &s, metav1.UpdateOptions{}))
		waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.0.1", "10.0.0.3(not ready)"},
			discoveryv1.AddressTypeIPv6: {"fd00::1"},
		})
		waitFor(t, func() bool {
			return mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv4].Labels["app"] == "web"
		})
	})

	t.Run("slices of others are left alone", func(t *testing.T) {
		theirs := must[*discoveryv1.EndpointSlice](t)(slicesAPI.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-by-hand", Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "someone-else"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}},
		}, metav1.CreateOptions{}))
		// A change of the Endpoints makes the controller look again.
		cur := must[*corev1.Endpoints](t)(eps.Get(ctx, "web", metav1.GetOptions{}))
		cur.Annotations["team"] = "green"
		must[*corev1.Endpoints](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
		// The controller writes each address type's slice on its own:
		// wait for both, or the take-over below races its second write.
		waitFor(t, func() bool {
			got := mirroredSlices(t, c, ns, "web")
			return got[discoveryv1.AddressTypeIPv4].Annotations["team"] == "green" &&
				got[discoveryv1.AddressTypeIPv6].Annotations["team"] == "green"
		})
		now := must[*discoveryv1.EndpointSlice](t)(slicesAPI.Get(ctx, theirs.Name, metav1.GetOptions{}))
		if now.ResourceVersion != theirs.ResourceVersion {
			t.Errorf("another manager's slice was written: %+v", now)
		}
		// Taking a mirrored slice over makes it theirs: the controller
		// mirrors into a new one.
		s := mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv6]
		s.Labels[discoveryv1.LabelManagedBy] = "someone-else"
		must[*discoveryv1.EndpointSlice](t)(slicesAPI.Update(ctx, &s, metav1.UpdateOptions{}))
		waitFor(t, func() bool {
			n, ok := mirroredSlices(t, c, ns, "web")[discoveryv1.AddressTypeIPv6]
			return ok && n.Name != s.Name
		})
		must[*discoveryv1.EndpointSlice](t)(slicesAPI.Get(ctx, s.Name, metav1.GetOptions{}))
	})

	t.Run("skip-mirror", func(t *testing.T) {
		cur := must[*corev1.Endpoints](t)(eps.Get(ctx, "web", metav1.GetOptions{}))
		cur.Labels[discoveryv1.LabelSkipMirror] = "true"
		must[*corev1.Endpoints](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
		waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{})
		cur = must[*corev1.Endpoints](t)(eps.Get(ctx, "web", metav1.GetOptions{}))
		delete(cur.Labels, discoveryv1.LabelSkipMirror)
		must[*corev1.Endpoints](t)(eps.Update(ctx, cur, metav1.UpdateOptions{}))
		waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.0.1", "10.0.0.3(not ready)"},
			discoveryv1.AddressTypeIPv6: {"fd00::1"},
		})
	})

	t.Run("leader election locks are not mirrored", func(t *testing.T) {
		must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "lock", Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: `{"holderIdentity":"a"}`}},
			Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.1.1"}}}},
		}, metav1.CreateOptions{}))
		must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "after-lock"},
			Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.1.2"}}}},
		}, metav1.CreateOptions{}))
		// Endpoints are mirrored in no set order: by the time a later
		// one is, the lock may still be on its way. Look again after.
		waitMirrored(t, c, ns, "after-lock", map[discoveryv1.AddressType][]string{discoveryv1.AddressTypeIPv4: {"10.0.1.2"}})
		time.Sleep(500 * time.Millisecond)
		if got := mirroredSlices(t, c, ns, "lock"); len(got) != 0 {
			t.Errorf("a leader election lock was mirrored: %v", got)
		}
	})

	t.Run("too many addresses", func(t *testing.T) {
		var many []corev1.EndpointAddress
		for i := range 1005 {
			many = append(many, corev1.EndpointAddress{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
		}
		big := must[*corev1.Endpoints](t)(eps.Create(ctx, &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "big"},
			Subsets:    []corev1.EndpointSubset{{Addresses: many}},
		}, metav1.CreateOptions{}))
		waitFor(t, func() bool {
			return len(mirroredSlices(t, c, ns, "big")[discoveryv1.AddressTypeIPv4].Endpoints) == 1000
		})
		event := waitEvent(t, c, ns, big.UID, "TooManyAddressesToMirror")
		if want := "A max of 1000 addresses can be mirrored to EndpointSlices per Endpoints subset. 5 addresses were skipped"; event.Message != want || event.Type != corev1.EventTypeWarning || event.Source.Component != "endpoint-slice-mirroring-controller" {
			t.Errorf("event %q (%s, from %q), want %q", event.Message, event.Type, event.Source.Component, want)
		}
	})

	t.Run("invalid as a slice: nothing mirrored, an Event says why", func(t *testing.T) {
		// Two ports of one name: a valid Endpoints, an invalid slice.
		// Before that change, web-2 mirrors to two slices; after it,
		// the IPv6 subset would still be valid alone.
		in := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "web-2"},
			Subsets: []corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{{IP: "10.0.2.1"}}, Ports: []corev1.EndpointPort{{Name: "a", Port: 1}, {Name: "b", Port: 2}}},
				{Addresses: []corev1.EndpointAddress{{IP: "fd00::2"}}, Ports: []corev1.EndpointPort{{Name: "c", Port: 3}}},
			},
		}
		created := must[*corev1.Endpoints](t)(eps.Create(ctx, in, metav1.CreateOptions{}))
		waitMirrored(t, c, ns, "web-2", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.2.1"},
			discoveryv1.AddressTypeIPv6: {"fd00::2"},
		})
		created.Subsets[0].Ports[1].Name = "a"
		must[*corev1.Endpoints](t)(eps.Update(ctx, created, metav1.UpdateOptions{}))
		expectUnmirrored(t, c, created, "ports[1].name: Duplicate value")
	})

	t.Run("invalid in one of two writes: neither is written", func(t *testing.T) {
		// Both subsets change: the IPv4 slice validly, then the IPv6 one
		// invalidly. Nothing ends mirrored either way; a watch shows the
		// valid write never happened.
		in := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "web-3"},
			Subsets: []corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{{IP: "10.0.3.1"}}, Ports: []corev1.EndpointPort{{Name: "a", Port: 1}}},
				{Addresses: []corev1.EndpointAddress{{IP: "fd00::3"}}, Ports: []corev1.EndpointPort{{Name: "c", Port: 3}, {Name: "d", Port: 4}}},
			},
		}
		created := must[*corev1.Endpoints](t)(eps.Create(ctx, in, metav1.CreateOptions{}))
		waitMirrored(t, c, ns, "web-3", map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: {"10.0.3.1"},
			discoveryv1.AddressTypeIPv6: {"fd00::3"},
		})
		sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web-3"}
		sel.ResourceVersion = must[*discoveryv1.EndpointSliceList](t)(slicesAPI.List(ctx, sel)).ResourceVersion
		w := must[watch.Interface](t)(slicesAPI.Watch(ctx, sel))
		defer w.Stop()
		created.Subsets[0].Addresses = append(created.Subsets[0].Addresses, corev1.EndpointAddress{IP: "10.0.3.2"})
		created.Subsets[1].Ports[1].Name = "c"
		must[*corev1.Endpoints](t)(eps.Update(ctx, created, metav1.UpdateOptions{}))
		expectUnmirrored(t, c, created, "ports[1].name: Duplicate value")
		for deleted := 0; deleted < 2; {
			select {
			case ev := <-w.ResultChan():
				s, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok {
					t.Fatalf("watch: %v", ev.Object)
				}
				if ev.Type == watch.Deleted {
					deleted++
				} else if slices.Contains(addresses(*s), "10.0.3.2") {
					t.Errorf("%s %s: the valid half was written", ev.Type, s.Name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the slices' deletions not seen after 10s")
			}
		}
	})

	t.Run("deleting the Endpoints deletes its slices", func(t *testing.T) {
		if err := eps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitMirrored(t, c, ns, "web", map[discoveryv1.AddressType][]string{})
		if _, err := slicesAPI.Get(ctx, "web-by-hand", metav1.GetOptions{}); err != nil {
			t.Errorf("another manager's slice: %v", err)
		}
	})
}

// expectUnmirrored waits until ep mirrors to no slice, with a
// FailedToMirror Event whose message says why.
func expectUnmirrored(t testing.TB, c kubernetes.Interface, ep *corev1.Endpoints, why string) {
	t.Helper()
	waitMirrored(t, c, ep.Namespace, ep.Name, map[discoveryv1.AddressType][]string{})
	event := waitEvent(t, c, ep.Namespace, ep.UID, "FailedToMirror")
	if !strings.Contains(event.Message, why) {
		t.Errorf("event message %q does not say %q", event.Message, why)
	}
}

// waitEvent waits for an Event of reason about the object uid and
// returns it.
func waitEvent(t testing.TB, c kubernetes.Interface, ns string, uid types.UID, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitFor(t, func() bool {
		list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing events: %v", err)
		}
		i := slices.IndexFunc(list.Items, func(e corev1.Event) bool { return e.InvolvedObject.UID == uid && e.Reason == reason })
		if i >= 0 {
			found = list.Items[i]
		}
		return i >= 0
	})
	return found
}

// TestEndpointSliceMirroringRestart: after a restart the controller
// looks at every Endpoints again: slices in sync are not rewritten, and
// it mirrors as before.
func TestEndpointSliceMirroringRestart(t *testing.T) {
	dir := t.TempDir()
	ts := testserver.StartIn(t, dir)
	c := ts.Client(t)
	ctx := t.Context()
	for _, name := range []string{"stays", "goes"} {
		must[*corev1.Endpoints](t)(c.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.3.1"}}}},
		}, metav1.CreateOptions{}))
		waitMirrored(t, c, "default", name, map[discoveryv1.AddressType][]string{discoveryv1.AddressTypeIPv4: {"10.0.3.1"}})
	}
	stays := mirroredSlices(t, c, "default", "stays")[discoveryv1.AddressTypeIPv4]
	goes := mirroredSlices(t, c, "default", "goes")[discoveryv1.AddressTypeIPv4]
	ts.Stop()

	ts2 := testserver.StartIn(t, dir)
	c2 := ts2.Client(t)
	if err := c2.CoreV1().Endpoints("default").Delete(ctx, "goes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := c2.DiscoveryV1().EndpointSlices("default").Get(ctx, goes.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	now := must[*discoveryv1.EndpointSlice](t)(c2.DiscoveryV1().EndpointSlices("default").Get(ctx, stays.Name, metav1.GetOptions{}))
	if now.ResourceVersion != stays.ResourceVersion {
		t.Errorf("a slice in sync was rewritten after the restart: resourceVersion %s, then %s", stays.ResourceVersion, now.ResourceVersion)
	}
}
