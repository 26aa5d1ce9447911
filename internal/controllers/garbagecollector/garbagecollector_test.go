package garbagecollector

import (
	"log/slog"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/testkit/testregistry"
)

// TestOwnerWaitsOnlyOnceTheGraphSaysSo: the registry can be ahead of the
// graph. An object looked at after its owner was marked for a foreground
// deletion, but before the graph has that mark and the dependent created
// before it, would be deleted in the background, its own dependent
// orphaned of a foreground deletion; it waits for the graph instead, and
// goes in the foreground once the graph has caught up.
func TestOwnerWaitsOnlyOnceTheGraphSaysSo(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	ctx := t.Context()
	res, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		t.Fatal("no leases")
	}
	create := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		l.UID = ""
		out, err := reg.Create(ctx, res, "ns", l, registry.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.Object.(*coordinationv1.Lease)
	}
	get := func(name string) *coordinationv1.Lease {
		o, err := reg.Get(ctx, res, "ns", name, "")
		if err != nil {
			t.Fatal(err)
		}
		return o.Object().(*coordinationv1.Lease)
	}
	a := create(newLease("a", nil))
	b := create(newLease("b", nil, a))
	c := create(newLease("c", []string{"example.com/hold"}, b))
	fg := metav1.DeletePropagationForeground
	if _, err := reg.Delete(ctx, res, "ns", "a", &metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	// A consistent read: the cache has the mark from here on.
	if marked := get("a"); marked.DeletionTimestamp == nil {
		t.Fatalf("a after a foreground delete: %+v", marked.ObjectMeta)
	}

	col := New(reg, slog.New(slog.DiscardHandler))
	col.graph.observe(res, b, false) // the graph has b only
	if err := col.collect(ctx, col.graph.get(b.UID)); err != nil {
		t.Fatal(err)
	}
	if o, err := reg.Get(ctx, res, "ns", "b", ""); err != nil || o.Object().GetDeletionTimestamp() != nil {
		t.Fatalf("b was deleted before the graph had its owner's mark (%v)", err)
	}

	var attend []string
	for _, obj := range []*coordinationv1.Lease{c, get("a")} {
		for _, uid := range col.graph.observe(res, obj, false) {
			if n := col.graph.get(uid); n != nil {
				attend = append(attend, n.name)
			}
		}
	}
	if !slices.Contains(attend, "b") {
		t.Fatalf("observing a's mark looks at %q, not b", attend)
	}
	if err := col.collect(ctx, col.graph.get(b.UID)); err != nil {
		t.Fatal(err)
	}
	if got := get("b"); got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("b after the graph caught up: %+v, want it in a foreground deletion", got.ObjectMeta)
	}
}
