// Package resources describes what leasehold serves. A Kind is one kind of
// stored object described once, from small parts: its Names, where it is
// stored (KeyPath), the group Versions it is served at (each with its Go
// types, defaults, conversion to the storage version and OpenAPI
// definitions), its write Strategy and UpdatePolicy, its Subresources,
// its Table and its field selectors (Fields). A Resource is a Kind at one
// Version: what a request path names.
//
// Everything else is derived from the list of kinds: the codec's scheme,
// the discovery documents, the OpenAPI documents and the type converter of
// server-side apply, routing, and the watch caches. The registry
// implements every verb once for every kind. Adding a kind is writing its
// description in a sub-package (lease, endpoints, namespace) and adding it
// to the list in package builtin.
//
// metadata.go holds what the descriptions share: ObjectMeta validation
// with kube-apiserver's exact error lists (ValidateObjectMeta,
// CheckMetaUpdate, and ValidateCreate/ValidateUpdate, which add the
// generic checks kube-apiserver's rest package runs around every kind's
// own), and the Name and Age table columns.
package resources
