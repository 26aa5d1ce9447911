// Package leasecandidate describes coordination.k8s.io LeaseCandidates as
// kube-apiserver 1.36 serves them with its CoordinatedLeaderElection gate
// on: stored at v1beta1 (its storage version override in
// pkg/kubeapiserver/default_storage_factory_builder.go) and served at
// v1beta1 and v1alpha2, whose types are field for field the same; the
// validation of pkg/apis/coordination/validation (ValidateLeaseCandidate*);
// the strategy of pkg/registry/coordination/leasecandidate; and the printer
// of pkg/printers/internalversion/printers.go.
//
// One difference: kube-apiserver lists spec.leaseName among a candidate's
// selectable fields but registers no field label conversion for it, so it
// refuses fieldSelector=spec.leaseName=NAME; leasehold serves it. Like
// Endpoints, the deprecated versions come without kube-apiserver's
// deprecation warning.
package leasecandidate
