package lease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Term is a Lease's term as leader election judges it: whether the Lease
// has a holder, and when the holder's claim ends.
//
// This is leasehold's one definition of an expired Lease, used by the
// table's Expired column (kubectl get -o wide) and by the lease metrics,
// and mirrored by leaseTerm and termExpired in the web view
// (internal/webui/static/app.js): keep the three in step.
//
//   - A Lease without a holder (holderIdentity unset or "") is released,
//     never expired: client-go's leader election takes such a Lease at
//     once, whatever its times (tryAcquireOrRenew checks
//     len(HolderIdentity) > 0 before the term), and its release() leaves
//     exactly that: no holder, leaseDurationSeconds 1, renewTime now.
//   - A held Lease ends at renewTime + leaseDurationSeconds and has
//     expired once that is not after now (client-go's isLeaseValid is
//     end.After(now)).
//   - A held Lease without renewTime or leaseDurationSeconds has no term
//     (End is the zero time): it has expired. client-go reads a missing
//     duration as 0, so any candidate takes the Lease at once, and
//     kube-apiserver's coordinated leader election controller counts
//     either missing as expired (kubernetes
//     pkg/controlplane/controller/leaderelection, isLeaseExpired).
//
// Now is the server's clock and renewTime the holder's: they must agree
// to well within the lease duration. (client-go measures the term from
// when it observed the renewal, on its own clock, which a server that
// did not watch the Lease all along cannot know.)
type Term struct {
	Held bool
	// End is when the holder's claim ends; the zero time for a held Lease
	// without a term, and for one without a holder.
	End time.Time
}

// TermOf returns the term of a Lease's spec.
func TermOf(spec *coordinationv1.LeaseSpec) Term {
	if spec.HolderIdentity == nil || *spec.HolderIdentity == "" {
		return Term{}
	}
	if spec.RenewTime == nil || spec.RenewTime.IsZero() || spec.LeaseDurationSeconds == nil {
		return Term{Held: true}
	}
	return Term{Held: true, End: spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)}
}

// Expired reports whether the term has a holder whose claim ended at or
// before now.
func (t Term) Expired(now time.Time) bool { return t.Held && !t.End.After(now) }

// Expired reports whether a Lease with this spec has expired at now: see
// Term.
func Expired(spec *coordinationv1.LeaseSpec, now time.Time) bool { return TermOf(spec).Expired(now) }
