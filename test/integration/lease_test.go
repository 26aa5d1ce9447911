package integration

import (
	"github.com/leasehold/leasehold/internal/testkit/testserver"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaseSpecRoundTrip: every spec field survives a create and a read,
// in JSON and protobuf, its pointers keeping "" and 0 apart from absent.
// The generic verbs are the per-kind suite's (TestKinds).
func TestLeaseSpecRoundTrip(t *testing.T) {
	ts := testserver.Start(t)
	for name, c := range ts.Clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			leases := c.CoordinationV1().Leases("default")
			now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
			in := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "round-trip-" + name},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr(""),
					LeaseDurationSeconds: ptr[int32](15),
					AcquireTime:          &now,
					RenewTime:            &now,
					LeaseTransitions:     ptr[int32](0),
					Strategy:             ptr(coordinationv1.OldestEmulationVersion),
					PreferredHolder:      ptr("b"),
				},
			}
			created := must[*coordinationv1.Lease](t)(leases.Create(ctx, in, metav1.CreateOptions{}))
			if diff := cmp.Diff(in.Spec, created.Spec); diff != "" {
				t.Fatalf("spec changed on create (-sent +stored):\n%s", diff)
			}
			got := must[*coordinationv1.Lease](t)(leases.Get(ctx, in.Name, metav1.GetOptions{}))
			if diff := cmp.Diff(in.Spec, got.Spec); diff != "" {
				t.Fatalf("spec changed on read (-sent +read):\n%s", diff)
			}
			empty := must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "empty-" + name}}, metav1.CreateOptions{}))
			if diff := cmp.Diff(coordinationv1.LeaseSpec{}, empty.Spec); diff != "" {
				t.Fatalf("an empty spec gained fields (-want +got):\n%s", diff)
			}
		})
	}
}
