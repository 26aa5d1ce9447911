package registrations

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func lease(name, addr string) *coordinationv1.Lease {
	holder, secs := "me", int32(10)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Labels:      map[string]string{LabelService: "web"},
			Annotations: map[string]string{AnnotationAddresses: addr, AnnotationPorts: "grpc:8080"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs},
	}
}

func regs(t *testing.T, n int) []*registration {
	t.Helper()
	var out []*registration
	for i := range n {
		r, err := parse(lease(fmt.Sprintf("r-%03d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

var web = types.NamespacedName{Namespace: "ns", Name: "web"}

// apply carries out p on existing, naming created slices new-N.
func apply(existing []*discoveryv1.EndpointSlice, p plan) []*discoveryv1.EndpointSlice {
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		byName[s.Name] = s
	}
	for _, s := range p.update {
		byName[s.Name] = s
	}
	for _, s := range p.remove {
		delete(byName, s.Name)
	}
	for i, s := range p.create {
		s = s.DeepCopy()
		s.Name = fmt.Sprintf("new-%d", len(existing)+i)
		byName[s.Name] = s
	}
	var out []*discoveryv1.EndpointSlice
	for _, s := range byName {
		out = append(out, s)
	}
	return out
}

func sizes(ss []*discoveryv1.EndpointSlice) map[string]int {
	out := map[string]int{}
	for _, s := range ss {
		out[s.Name] = len(s.Endpoints)
	}
	return out
}

// TestPack: at most 100 endpoints a slice; endpoints stay where they
// are; new ones fill the gaps before new slices are made; a service
// keeps one slice when it has no endpoint left.
func TestPack(t *testing.T) {
	all := regs(t, 250)
	p := pack(web, all, nil)
	if len(p.create) != 3 || len(p.update)+len(p.remove) != 0 {
		t.Fatalf("250 endpoints: create %d update %d remove %d, want 3 creates", len(p.create), len(p.update), len(p.remove))
	}
	ss := apply(nil, p)
	if diff := cmp.Diff(map[string]int{"new-0": 100, "new-1": 100, "new-2": 50}, sizes(ss)); diff != "" {
		t.Fatalf("sizes (-want +got):\n%s", diff)
	}
	// Nothing changed: nothing written.
	if p := pack(web, all, ss); !p.empty() {
		t.Fatalf("in sync, yet %d creates, %d updates, %d removes", len(p.create), len(p.update), len(p.remove))
	}
	// One goes from the first slice: one update, no move.
	without := append(append([]*registration{}, all[:10]...), all[11:]...)
	p = pack(web, without, ss)
	if len(p.create)+len(p.remove) != 0 || len(p.update) != 1 || p.update[0].Name != "new-0" {
		t.Fatalf("one endpoint gone: create %d update %v remove %d", len(p.create), len(p.update), len(p.remove))
	}
	ss = apply(ss, p)
	// Two come: the gap in the written slice first, then the half-empty.
	more := append(without, regs(t, 252)[250:]...)
	p = pack(web, more, ss)
	ss = apply(ss, p)
	if diff := cmp.Diff(map[string]int{"new-0": 100, "new-1": 100, "new-2": 51}, sizes(ss)); diff != "" {
		t.Fatalf("sizes (-want +got):\n%s", diff)
	}
	// All go: one slice stays, empty.
	ss = apply(ss, pack(web, nil, ss))
	if len(ss) != 1 || len(ss[0].Endpoints) != 0 {
		t.Fatalf("no endpoints: %v, want one empty slice", sizes(ss))
	}
}

func TestParse(t *testing.T) {
	r, err := parse(lease("a", "fd00::1"))
	if err != nil || r.group.at != discoveryv1.AddressTypeIPv6 || r.group.ports != "grpc:8080/TCP" || !r.held || r.service != web {
		t.Fatalf("parse: %+v, %v", r, err)
	}
	for _, bad := range []func(l *coordinationv1.Lease){
		func(l *coordinationv1.Lease) { l.Annotations[AnnotationAddresses] = "example.com" },
		func(l *coordinationv1.Lease) { l.Annotations[AnnotationAddresses] = "10.0.0.1,fd00::1" },
		func(l *coordinationv1.Lease) { l.Annotations[AnnotationPorts] = "grpc:0" },
		func(l *coordinationv1.Lease) { l.Annotations[AnnotationPorts] = "grpc:80/HTTP" },
		func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = nil },
	} {
		l := lease("b", "10.0.0.1")
		bad(l)
		if r, err := parse(l); err == nil {
			t.Errorf("%v parsed: %+v", l, r)
		}
	}
	l := lease("c", "10.0.0.1")
	delete(l.Labels, LabelService)
	if r, err := parse(l); r != nil || err != nil {
		t.Errorf("a Lease without the label: %v, %v", r, err)
	}
}
