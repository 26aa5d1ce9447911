package integration

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func TestLeaseValidation(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	leases := s.Client(t).CoordinationV1().Leases("default")
	cases := []struct {
		name    string
		spec    coordinationv1.LeaseSpec
		message string
	}{
		{"duration", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr[int32](0)},
			`Lease.coordination.k8s.io "bad" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`},
		{"transitions", coordinationv1.LeaseSpec{LeaseTransitions: ptr[int32](-1)},
			`Lease.coordination.k8s.io "bad" is invalid: spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`},
		{"preferred holder without strategy", coordinationv1.LeaseSpec{PreferredHolder: ptr("x")},
			"Lease.coordination.k8s.io \"bad\" is invalid: spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"},
		{"unknown strategy", coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("Newest"))},
			`Lease.coordination.k8s.io "bad" is invalid: spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: tc.spec}, metav1.CreateOptions{})
			se := wantStatus(t, err, 422, metav1.StatusReasonInvalid)
			if se.ErrStatus.Message != tc.message {
				t.Errorf("message:\n got %q\nwant %q", se.ErrStatus.Message, tc.message)
			}
		})
	}
	// An invalid name.
	_, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid)
}

func TestCoordinatedLeaderElectionFlag(t *testing.T) {
	t.Parallel()
	spec := coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.OldestEmulationVersion), PreferredHolder: ptr("b")}
	for _, on := range []bool{true, false} {
		s := testserver.Start(t, func(c *server.Config) { c.CoordinatedLeaderElection = on })
		l := must[*coordinationv1.Lease](t)(s.Client(t).CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cle"}, Spec: spec}, metav1.CreateOptions{}))
		kept := l.Spec.Strategy != nil && l.Spec.PreferredHolder != nil
		if kept != on {
			t.Errorf("coordinated leader election %v: strategy and preferredHolder kept = %v (%+v)", on, kept, l.Spec)
		}
	}
}
