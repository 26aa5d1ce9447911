package lease_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources/lease"
)

// TestExpired: a lease has expired when it has a holder whose
// renewTime+leaseDurationSeconds is not after now, or who has no renewTime
// or duration; a lease without a holder never has.
func TestExpired(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	renewed := func(d time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: now.Add(d)} }
	for _, tc := range []struct {
		name string
		spec coordinationv1.LeaseSpec
		want bool
	}{
		{"held, within its term", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: renewed(-14 * time.Second)}, false},
		{"held, term ends now", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: renewed(-15 * time.Second)}, true},
		{"held, term over", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: renewed(-time.Hour)}, true},
		{"held, renewed in the future", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), RenewTime: renewed(time.Minute)}, false},
		{"held, duration 0", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](0), RenewTime: renewed(0)}, true},
		{"held, no duration", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), RenewTime: renewed(0)}, true},
		{"held, no renewTime", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15)}, true},
		{"released by client-go", coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr[int32](1), RenewTime: renewed(-time.Hour)}, false},
		{"no holder, no times", coordinationv1.LeaseSpec{}, false},
		{"no holder, term not over", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr[int32](15), RenewTime: renewed(0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.Expired(&tc.spec, now); got != tc.want {
				t.Errorf("Expired = %t, want %t (term %+v)", got, tc.want, lease.TermOf(&tc.spec))
			}
		})
	}
}
