package controllers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Renewal is when the server saw a Lease's spec.renewTime take its
// current value. Whether a Lease has expired is judged from it by the
// server's clock alone, never from the renewTime itself, which is the
// holder's clock: a holder whose clock is an hour off is judged right.
// A Lease first seen (after a restart too) counts from then.
type Renewal struct {
	renew time.Time // spec.renewTime as last seen (zero: none)
	// At is the server's time the renewTime was seen to change.
	At time.Time
}

// Next returns the renewal of lease as seen at now, r being what was seen
// of it before (the zero Renewal: nothing).
func (r Renewal) Next(lease *coordinationv1.Lease, now time.Time) Renewal {
	var renew time.Time
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	if !r.At.IsZero() && r.renew.Equal(renew) {
		return r
	}
	return Renewal{renew: renew, At: now}
}
