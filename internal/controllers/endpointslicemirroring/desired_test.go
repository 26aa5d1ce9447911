package endpointslicemirroring

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	esutil "k8s.io/endpointslice/util"
)

func ptr[T any](v T) *T { return &v }

func endpoints(subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "uid-web",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "x", corev1.LastAppliedConfigAnnotation: "{}", corev1.EndpointsLastChangeTriggerTime: "t"},
		},
		Subsets: subsets,
	}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

// summary renders the groups of d as "TYPE ports: ip(r|n) ...", keys in
// order.
func summary(d *desired) []string {
	var out []string
	for _, k := range d.order {
		g := d.groups[k]
		var b strings.Builder
		b.WriteString(string(k.addressType))
		for _, p := range g.ports {
			fmt.Fprintf(&b, " %s/%d/%s", *p.Name, *p.Port, *p.Protocol)
		}
		b.WriteString(":")
		for _, e := range g.endpoints {
			r := "n"
			if *e.Conditions.Ready {
				r = "r"
			}
			fmt.Fprintf(&b, " %s(%s)", e.Addresses[0], r)
		}
		out = append(out, b.String())
	}
	return out
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func TestDesired(t *testing.T) {
	cases := []struct {
		name             string
		subsets          []corev1.EndpointSubset
		want             []string
		invalid, skipped int
	}{
		{
			name:    "ready first, each by IP, not ready as ready=false",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.2", "10.0.0.1"), NotReadyAddresses: addrs("10.0.0.0"), Ports: []corev1.EndpointPort{port("http", 80)}}},
			want:    []string{"IPv4 http/80/TCP: 10.0.0.1(r) 10.0.0.2(r) 10.0.0.0(n)", "IPv6 http/80/TCP:"},
		},
		{
			name:    "one slice per address family; addresses sorted as written",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "fd00::1", "fd00:0:0::2"), Ports: []corev1.EndpointPort{port("", 80)}}},
			want:    []string{"IPv4 /80/TCP: 10.0.0.1(r)", "IPv6 /80/TCP: fd00::2(r) fd00::1(r)"},
		},
		{
			name: "repacked: subsets of one port set merge, duplicates go, not ready wins",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.1"), Ports: []corev1.EndpointPort{port("a", 1)}},
				{Addresses: addrs("10.0.0.3"), NotReadyAddresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{port("a", 1)}},
			},
			want: []string{"IPv4 a/1/TCP: 10.0.0.1(r) 10.0.0.3(r) 10.0.0.2(n)", "IPv6 a/1/TCP:"},
		},
		{
			// Ports in the order of their hashes, as upstream.
			name: "repacked: ports of the same addresses share a slice",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("a", 1)}},
				{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("b", 2)}},
				{Addresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{port("c", 3)}},
			},
			want: []string{"IPv4 b/2/TCP a/1/TCP: 10.0.0.1(r)", "IPv6 b/2/TCP a/1/TCP:", "IPv4 c/3/TCP: 10.0.0.9(r)", "IPv6 c/3/TCP:"},
		},
		{
			// RepackSubsets keeps a port only with the addresses it serves.
			name: "repacked: a port without addresses goes",
			subsets: []corev1.EndpointSubset{
				{Ports: []corev1.EndpointPort{port("idle", 9)}},
				{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("a", 1)}},
			},
			want: []string{"IPv4 a/1/TCP: 10.0.0.1(r)", "IPv6 a/1/TCP:"},
		},
		{
			name:    "no ports",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1")}},
			want:    []string{"IPv4: 10.0.0.1(r)", "IPv6:"},
		},
		{
			name:    "irregular IPs are written canonically",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("010.000.000.001", "::ffff:10.0.0.2"), Ports: []corev1.EndpointPort{port("", 80)}}},
			want:    []string{"IPv4 /80/TCP: 10.0.0.1(r) 10.0.0.2(r)", "IPv6 /80/TCP:"},
		},
		{
			name:    "no IP: skipped as invalid",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "nope"), Ports: []corev1.EndpointPort{port("", 80)}}},
			want:    []string{"IPv4 /80/TCP: 10.0.0.1(r)", "IPv6 /80/TCP:"},
			invalid: 1, skipped: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := endpoints(tc.subsets...)
			before := ep.DeepCopy()
			d := desiredFor(ep, maxEndpointsPerSubset)
			if diff := cmp.Diff(tc.want, summary(d)); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if d.invalid != tc.invalid || d.skipped != tc.skipped {
				t.Errorf("invalid %d skipped %d, want %d %d", d.invalid, d.skipped, tc.invalid, tc.skipped)
			}
			if diff := cmp.Diff(before, ep); diff != "" {
				t.Errorf("the Endpoints changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestDesiredCap: at most max addresses of a subset, ready ones first.
func TestDesiredCap(t *testing.T) {
	var ready, notReady []string
	for i := range 1200 {
		ready = append(ready, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}
	for i := range 10 {
		notReady = append(notReady, fmt.Sprintf("10.9.0.%d", i+1))
	}
	d := desiredFor(endpoints(corev1.EndpointSubset{Addresses: addrs(ready...), NotReadyAddresses: addrs(notReady...)}), maxEndpointsPerSubset)
	g := d.groups[d.order[0]]
	if len(g.endpoints) != 1000 || d.skipped != 210 || d.invalid != 0 {
		t.Fatalf("%d endpoints, %d skipped, %d invalid; want 1000, 210, 0", len(g.endpoints), d.skipped, d.invalid)
	}
	for _, e := range g.endpoints {
		if !*e.Conditions.Ready {
			t.Fatalf("a not ready address %s was mirrored before ready ones", e.Addresses[0])
		}
	}
}

func TestNewSlice(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1", Hostname: "h", NodeName: ptr("n1"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns", UID: "u"}}},
		Ports:     []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptr("h2c")}},
	})
	d := desiredFor(ep, maxEndpointsPerSubset)
	got := newSlice(ep, discoveryv1.AddressTypeIPv4, d.groups[d.order[0]], "")
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-", Namespace: "ns",
			Labels: map[string]string{
				"app": "web", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslicemirroring-controller.k8s.io",
			},
			Annotations: map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Endpoints", Name: "web", UID: "uid-web", Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](80), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: ptr("h2c")}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			Hostname:   ptr("h"),
			NodeName:   ptr("n1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns", UID: "u"},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slice (-want +got):\n%s", diff)
	}
}

func TestShouldMirror(t *testing.T) {
	ep := endpoints()
	if !shouldMirror(ep) {
		t.Error("a plain Endpoints is not mirrored")
	}
	skip := ep.DeepCopy()
	skip.Labels[discoveryv1.LabelSkipMirror] = "true"
	lock := ep.DeepCopy()
	lock.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] = "{}"
	if shouldMirror(skip) || shouldMirror(lock) {
		t.Error("skip-mirror or a leader election lock is mirrored")
	}
	notTrue := ep.DeepCopy()
	notTrue.Labels[discoveryv1.LabelSkipMirror] = "yes"
	if !shouldMirror(notTrue) {
		t.Error(`skip-mirror other than "true" stops mirroring`)
	}
}

// existingFor returns what the controller would have created for ep,
// named.
func existingFor(ep *corev1.Endpoints, names ...string) []*discoveryv1.EndpointSlice {
	d := desiredFor(ep, maxEndpointsPerSubset)
	var out []*discoveryv1.EndpointSlice
	for _, k := range d.order {
		if g := d.groups[k]; len(g.endpoints) > 0 {
			s := newSlice(ep, k.addressType, g, names[len(out)])
			s.GenerateName = ""
			out = append(out, s)
		}
	}
	return out
}

func names(ss []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		n := s.Name
		if n == "" {
			n = s.GenerateName + "*"
		}
		out = append(out, n)
	}
	return out
}

func TestPlan(t *testing.T) {
	http := []corev1.EndpointPort{port("http", 80)}
	ep := endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2", "fd00::1"), Ports: http})
	type want struct{ create, update, remove []string }
	cases := []struct {
		name     string
		ep       *corev1.Endpoints
		existing func() []*discoveryv1.EndpointSlice
		want     want
	}{
		{
			name:     "nothing yet: one slice per family",
			ep:       ep,
			existing: func() []*discoveryv1.EndpointSlice { return nil },
			want:     want{create: []string{"web-*", "web-*"}},
		},
		{
			name: "in sync, whatever the order of endpoints",
			ep:   ep,
			existing: func() []*discoveryv1.EndpointSlice {
				ss := existingFor(ep, "a", "b")
				e := ss[0].Endpoints
				e[0], e[1] = e[1], e[0]
				return ss
			},
		},
		{
			name: "an endpoint removed by someone else is put back",
			ep:   ep,
			existing: func() []*discoveryv1.EndpointSlice {
				ss := existingFor(ep, "a", "b")
				ss[0].Endpoints = ss[0].Endpoints[:1]
				return ss
			},
			want: want{update: []string{"a"}},
		},
		{
			name: "a condition changed by someone else is put back",
			ep:   ep,
			existing: func() []*discoveryv1.EndpointSlice {
				ss := existingFor(ep, "a", "b")
				ss[1].Endpoints[0].Conditions.Ready = ptr(false)
				return ss
			},
			want: want{update: []string{"b"}},
		},
		{
			name: "labels, annotations and owner are put back",
			ep:   ep,
			existing: func() []*discoveryv1.EndpointSlice {
				ss := existingFor(ep, "a", "b")
				delete(ss[0].Labels, "app")
				ss[1].OwnerReferences = nil
				return ss
			},
			want: want{update: []string{"a", "b"}},
		},
		{
			name: "a second slice of one family goes",
			ep:   ep,
			existing: func() []*discoveryv1.EndpointSlice {
				ss := existingFor(ep, "a", "b")
				extra := ss[0].DeepCopy()
				extra.Name = "c"
				return append(ss, extra)
			},
			want: want{remove: []string{"c"}},
		},
		{
			name: "new ports: the old slices are reused",
			ep:   endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2", "fd00::1"), Ports: []corev1.EndpointPort{port("http", 8080)}}),
			existing: func() []*discoveryv1.EndpointSlice {
				return existingFor(ep, "a", "b")
			},
			want: want{update: []string{"a", "b"}},
		},
		{
			name: "no IPv6 address left: its slice goes",
			ep:   endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: http}),
			existing: func() []*discoveryv1.EndpointSlice {
				return existingFor(ep, "a", "b")
			},
			want: want{remove: []string{"b"}},
		},
		{
			name: "no subsets: every slice goes",
			ep:   endpoints(),
			existing: func() []*discoveryv1.EndpointSlice {
				return existingFor(ep, "a", "b")
			},
			want: want{remove: []string{"a", "b"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planFor(tc.ep, desiredFor(tc.ep, maxEndpointsPerSubset), tc.existing())
			got := want{create: names(p.create), update: names(p.update), remove: names(p.remove)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMirroredFor(t *testing.T) {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Labels: map[string]string{
		discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName,
	}}}
	if k, ok := mirroredFor(s); !ok || k != (types.NamespacedName{Namespace: "ns", Name: "web"}) {
		t.Errorf("mirroredFor = %v, %v", k, ok)
	}
	s.Labels[discoveryv1.LabelManagedBy] = "someone-else"
	if _, ok := mirroredFor(s); ok {
		t.Error("a slice of another manager is indexed as mirrored")
	}
}

// TestEndpointIdentity holds idOf to upstream's EndpointSet: two
// endpoints are one identity exactly when the set finds one by the other.
func TestEndpointIdentity(t *testing.T) {
	ref := func(ns, name, uid string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(uid)}
	}
	eps := []discoveryv1.Endpoint{
		{Addresses: []string{"10.0.0.1"}},
		{Addresses: []string{"10.0.0.1"}, NodeName: ptr("n1")}, // node is no part of identity
		{Addresses: []string{"10.0.0.2"}},
		{Addresses: []string{"10.0.0.1", "10.0.0.2"}},
		{Addresses: []string{"10.0.0.2", "10.0.0.1"}}, // a set: order is no part
		{Addresses: []string{"10.0.0.1"}, Hostname: ptr("a")},
		{Addresses: []string{"10.0.0.1"}, Hostname: ptr("")},
		{Addresses: []string{"10.0.0.1"}, TargetRef: ref("ns", "p", "1")},
		{Addresses: []string{"10.0.0.1"}, TargetRef: ref("ns", "p", "2")}, // nor the UID
		{Addresses: []string{"10.0.0.1"}, TargetRef: ref("ns", "q", "1")},
		{Addresses: []string{"10.0.0.1"}, TargetRef: ref("other", "p", "1")},
		{},
	}
	for i := range eps {
		for j := range eps {
			a, b := eps[i].DeepCopy(), eps[j].DeepCopy()
			set := esutil.EndpointSet{}
			set.Insert(a)
			upstream := set.Get(b) != nil
			if got := idOf(&eps[i]) == idOf(&eps[j]); got != upstream {
				t.Errorf("endpoints %d and %d: same identity %v, upstream's set says %v", i, j, got, upstream)
			}
		}
	}
}
