// Package endpointslicemirroring mirrors every v1 Endpoints into
// discovery.k8s.io/v1 EndpointSlices, as kube-controller-manager's
// endpointslicemirroring controller does
// (pkg/controller/endpointslicemirroring in kubernetes), so that a
// service registered as an Endpoints is found by the clients that read
// EndpointSlices (kube-proxy, gRPC's Kubernetes resolvers).
//
// # What a mirrored slice holds
//
// The Endpoints' subsets are first repacked into their canonical form:
// one subset per distinct set of addresses, each address once, not ready
// if any subset lists it so. Each subset then becomes one slice per
// address family it has addresses of (IPv4, IPv6), with its ports; an
// address becomes an endpoint with ready true or false, its hostname,
// nodeName and targetRef, its IP in canonical form. At most 1,000
// addresses of a subset are mirrored (a TooManyAddressesToMirror Event
// says how many were left out); an address that is no IP is skipped
// (InvalidIPAddress). A slice carries the Endpoints' labels plus
// kubernetes.io/service-name (the Endpoints' name) and
// endpointslice.kubernetes.io/managed-by
// (endpointslicemirroring-controller.k8s.io), its annotations but
// endpoints.kubernetes.io/last-change-trigger-time and kubectl's
// last-applied-configuration, and an ownerReference to the Endpoints
// with controller and blockOwnerDeletion set. New slices are named
// NAME-xxxxx.
//
// An Endpoints labelled endpointslice.kubernetes.io/skip-mirror: "true",
// or carrying a leader election record (the annotation of client-go's
// Endpoints locks), is not mirrored, and its mirrored slices are deleted;
// so are those of a deleted Endpoints. Slices managed by anyone else are
// never touched. A change to a mirrored slice by anyone else is put
// back: its endpoints, labels, annotations and owner are compared with
// what the Endpoints says.
//
// # Where leasehold differs, on purpose
//
//   - kube-controller-manager mirrors an Endpoints only when a Service of
//     the same name without a selector exists. leasehold serves no
//     Services, so it mirrors every Endpoints.
//   - An Endpoints that would mirror to an invalid slice (two ports of one
//     name, more than 100 ports: rules of EndpointSlices that Endpoints do
//     not have) mirrors to no slice at all, with a FailedToMirror Event
//     giving the slice's validation errors; kube-controller-manager writes
//     the valid slices and retries the others forever, leaving half a
//     service. Slices are checked with the kind's own validation before
//     anything is written.
//   - Endpoints within a slice are in a stable order (ready ones first,
//     each by IP) instead of a random one, and a slice is rewritten when its
//     ownerReference was removed.
//
// # Running
//
// The controller follows Endpoints and EndpointSlices through the
// registry's watches, and queues an Endpoints on each change of it or of
// a slice naming it; its own writes queue nothing. Five Endpoints are
// mirrored at once; a failed one is tried again after 1 s, doubling up to
// 100 s. It is a singleton: on etcd with several replicas one of them
// runs it at a time.
package endpointslicemirroring
