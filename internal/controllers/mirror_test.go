package controllers

import (
	"slices"
	"testing"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

func candidate(name, lease, rv string) registry.Event {
	c := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv},
		Spec:       coordinationv1beta1.LeaseCandidateSpec{LeaseName: lease},
	}
	return registry.Event{Type: watch.Added, Object: codec.Cached{Obj: c}}
}

// byLease groups candidates by the Lease they stand for.
func byLease(obj resources.Object) (types.NamespacedName, bool) {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.(*coordinationv1beta1.LeaseCandidate).Spec.LeaseName}, true
}

var listEnd = registry.Event{Type: watch.Bookmark, InitialEnd: true}

// TestMirrorLists: a list replaces what the mirror held, index included,
// and changed hears of every object it brings and of those it no longer
// finds (deleted while no watch was open); an older state never replaces
// a newer one.
func TestMirrorLists(t *testing.T) {
	var heard []string
	m := NewMirror(nil, resources.Resource{}, nil, byLease, func(obj, _ resources.Object) {
		heard = append(heard, obj.GetName()+"@"+obj.GetResourceVersion())
	})
	m.listing()
	m.apply([]registry.Event{candidate("a", "l1", "5"), candidate("b", "l1", "6")})
	select {
	case <-m.synced:
		t.Fatal("synced before the list ended")
	default:
	}
	m.apply([]registry.Event{listEnd})
	<-m.synced
	if len(m.ByIndex(types.NamespacedName{Namespace: "ns", Name: "l1"})) != 2 {
		t.Fatalf("index after the first list: %v", m.ByIndex(types.NamespacedName{Namespace: "ns", Name: "l1"}))
	}

	// A newer state seen through a write survives a list that brings an
	// older one.
	m.Observe(candidate("b", "l2", "9").Object.Object())
	heard = nil
	m.listing()
	m.apply([]registry.Event{candidate("b", "l1", "7"), candidate("c", "l2", "8"), listEnd})
	if got, want := heard, []string{"b@7", "c@8", "a@5"}; !slices.Equal(got, want) {
		t.Errorf("changed heard %v, want %v", got, want)
	}
	if m.Get("ns", "a") != nil {
		t.Error("a, not in the second list, is still held")
	}
	if b := m.Get("ns", "b"); b == nil || b.GetResourceVersion() != "9" {
		t.Errorf("b: %v, want the state at 9", b)
	}
	if m.HasIndex(types.NamespacedName{Namespace: "ns", Name: "l1"}) || len(m.ByIndex(types.NamespacedName{Namespace: "ns", Name: "l2"})) != 2 {
		t.Errorf("index after the second list: l1 %v, l2 %v", m.ByIndex(types.NamespacedName{Namespace: "ns", Name: "l1"}), m.ByIndex(types.NamespacedName{Namespace: "ns", Name: "l2"}))
	}
}
