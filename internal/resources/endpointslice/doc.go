// Package endpointslice describes discovery.k8s.io/v1 EndpointSlices as
// kube-apiserver 1.36 serves them, stored at
// /registry/endpointslices/NAMESPACE/NAME:
//
//   - v1 defaulting (pkg/apis/discovery/v1/defaults.go): a port without a
//     name gets "", without a protocol TCP;
//   - the write rules of pkg/registry/discovery/endpointslice/strategy.go:
//     generation 1 on create and one more on an update that changes
//     anything but metadata, or the labels; deprecatedTopology dropped, as
//     every request is a v1 request (a node name it held before may move to
//     nodeName); hints.forNodes kept (PreferSameTrafficDistribution is GA);
//     a PUT never creates and needs no resourceVersion; warnings for FQDN
//     slices on create and for IPs in non-standard forms unless an
//     EndpointSlice controller wrote them;
//   - the validation of pkg/apis/discovery/validation (validate.go), with
//     StrictIPCIDRValidation on, as it is by default in 1.36;
//   - the table of pkg/printers/internalversion/printers.go (table.go).
//
// Field selectors are the generic metadata.name and metadata.namespace.
package endpointslice
