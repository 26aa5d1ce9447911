package namespace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
)

func TestConditions(t *testing.T) {
	kinds := builtin.Kinds(builtin.Options{})
	leases := resources.Find(kinds, schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}).Storage()
	eps := resources.Find(kinds, schema.GroupKind{Kind: "Endpoints"}).Storage()
	held := func(finalizers ...string) codec.Cached {
		return codec.Cached{Obj: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers}}}
	}
	var left remaining
	left.add(leases, []codec.Cached{held("example.com/hold"), held("example.com/hold", "other.io/x")})
	left.add(eps, []codec.Cached{{Obj: &corev1.Endpoints{}}})
	left.failures = []string{"b failed", "a failed"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	var status corev1.NamespaceStatus
	if !mergeConditions(&status, left.conditions(t0), t0) {
		t.Fatal("first merge changed nothing")
	}
	type cond struct{ Type, Status, Reason, Message string }
	var got []cond
	for _, c := range status.Conditions {
		got = append(got, cond{string(c.Type), string(c.Status), c.Reason, c.Message})
	}
	want := []cond{
		{"NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"},
		{"NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
		{"NamespaceDeletionContentFailure", "True", "ContentDeletionFailed", "Failed to delete all resource types, 2 remaining: a failed, b failed"},
		{"NamespaceContentRemaining", "True", "SomeResourcesRemain", "Some resources are remaining: endpoints. has 1 resource instances, leases.coordination.k8s.io has 2 resource instances"},
		{"NamespaceFinalizersRemaining", "True", "SomeFinalizerRemain", "Some finalizers are remaining: example.com/hold in 2 resource instances, other.io/x in 1 resource instances"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	// The same again changes nothing; a cleared problem flips to its ok
	// state with a new transition time, the others keep theirs.
	t1 := t0.Add(time.Minute)
	if mergeConditions(&status, left.conditions(t1), t1) {
		t.Error("an unchanged round changed the conditions")
	}
	left.failures = nil
	if !mergeConditions(&status, left.conditions(t1), t1) {
		t.Fatal("a cleared failure changed nothing")
	}
	for _, c := range status.Conditions {
		wantTime := t0
		if c.Type == corev1.NamespaceDeletionContentFailure {
			wantTime = t1
			if c.Status != corev1.ConditionFalse || c.Reason != "ContentDeleted" {
				t.Errorf("cleared failure: %+v", c)
			}
		}
		if !c.LastTransitionTime.Time.Equal(wantTime) {
			t.Errorf("%s transitioned at %v, want %v", c.Type, c.LastTransitionTime, wantTime)
		}
	}
}
