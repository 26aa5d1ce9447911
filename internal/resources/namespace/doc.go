// Package namespace describes core v1 Namespaces as kube-apiserver serves
// them: the strategies of pkg/registry/core/namespace/strategy.go (main,
// status and finalize), v1 defaulting from pkg/apis/core/v1/defaults.go, the
// validation of pkg/apis/core/validation (ValidateNamespace*), and the
// printer of pkg/printers/internalversion/printers.go.
//
// Deletion (phase Terminating, the protected namespaces, removing contents
// and the "kubernetes" finalizer) is the registry's job, not described here.
package namespace
