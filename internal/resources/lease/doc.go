// Package lease describes coordination.k8s.io/v1 Leases as kube-apiserver
// serves them: validation from pkg/apis/coordination/validation, the
// CoordinatedLeaderElection field gating from
// pkg/registry/coordination/lease/strategy.go, and the printer columns from
// pkg/printers/internalversion/printers.go, plus a few wide-only columns of
// our own.
package lease
