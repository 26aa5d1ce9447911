// Package election is the coordinated leader election controller, the
// work kube-apiserver's leader-election-controller does behind its
// CoordinatedLeaderElection gate (pkg/controlplane/controller/leaderelection
// in kubernetes): for every Lease that LeaseCandidates stand for, it picks
// the holder. Candidates run client-go's leaderelection with Coordinated
// set, which never takes a Lease itself: it renews the Lease once the
// controller names it holder, and stops renewing (and, with
// ReleaseOnCancel, releases it) once the controller names another
// candidate preferredHolder.
//
// # What it does
//
// The candidates of one Lease agree on a strategy: the one of the
// candidates of the newest binaryVersion. For OldestEmulationVersion the
// controller elects the candidate with the lowest emulationVersion, then
// the lowest binaryVersion, then the oldest; any other strategy is left to
// another controller, and this one only creates the Lease naming it.
//
// An election takes place when the Lease is missing, free (no
// holderIdentity) or expired (renewTime + leaseDurationSeconds passed), or
// when a better candidate than the holder is up. Only live candidates can
// win: one that renewed within 5 s, or answered a ping. A ping sets the
// candidate's spec.pingTime; client-go's LeaseCandidate answers by
// renewing (spec.renewTime) at once. A candidate that does not answer
// within 5 s is dead until it renews again. The election waits for the
// candidates better than the best live one to answer or time out, then:
//
//   - a missing, free or expired Lease gets the winner as holderIdentity,
//     a renewTime of now and a leaseDurationSeconds of 5, which the winner
//     replaces with its own when it renews; leaseTransitions counts the
//     change of holder;
//   - a Lease held by a worse, live holder gets the winner as
//     preferredHolder: the holder stops renewing, and the Lease passes on
//     when it is released or expires.
//
// A preferredHolder whose candidate is gone, dead or no longer better is
// cleared. Candidates not renewed for 15 minutes are pinged, and deleted
// after 30.
//
// # Never stalling
//
// The controller keeps no memory of an election: each step is decided
// from the Lease and its candidates alone (decide), and each step that
// leaves something pending says when to look again, besides every change
// to the Lease or a candidate. kube-apiserver 1.36 can stall: it leaves an
// expired Lease alone when its best candidate is the expired holder, and
// does not clear a preferredHolder whose candidate went away, so the
// holder, which never renews a Lease naming a preferredHolder, lets it
// expire, and nobody renews it again (the area of kubernetes/kubernetes
// PR #138066). Both are handled here; see decide.
//
// # Time
//
// Expiry compares the holder's renewTime (its clock) with the server's
// clock, and an answer to a ping its renewTime with the server's
// pingTime, as in kube-apiserver: clocks must agree to well within a
// second.
package election
