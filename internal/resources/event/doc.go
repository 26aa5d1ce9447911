// Package event describes Events as kube-apiserver serves them: one kind
// stored once, at /registry/events/NAMESPACE/NAME in core v1's encoding,
// and served at two versions in two groups, core v1 (the storage version)
// and events.k8s.io/v1, converted as pkg/apis/events/v1/conversion.go
// converts them (involvedObject is regarding, message is note, source,
// firstTimestamp, lastTimestamp and count are the deprecated* fields).
//
// The write rules are pkg/registry/core/event/strategy.go's: nothing is
// prepared, a PUT creates and needs no resourceVersion, and validation is
// pkg/apis/core/validation/events.go's, which depends on the version of
// the request: core v1 keeps the legacy rules (namespaces agree; a
// "new" event, one with eventTime, names its reporting controller,
// instance, action and reason), and events.k8s.io/v1 adds strict ones
// (a DNS subdomain name, eventTime and type required, the deprecated
// fields unset on create, a series of two or more, everything but the
// series immutable on update). Errors name core's fields whatever the
// version, as kube-apiserver's do.
//
// Field selectors are kube-apiserver's (pkg/registry/core/event and
// pkg/apis/events/v1/conversion.go: regarding.* at events.k8s.io/v1 is
// involvedObject.*), and so is the table (printEvent of
// pkg/printers/internalversion/printers.go), the same at both versions.
//
// Events live for Options.TTL after their last write (kube-apiserver's
// --event-ttl): the description asks the store to expire them (Kind.TTL),
// which etcd does with leases and the embedded engine with its own index.
package event
