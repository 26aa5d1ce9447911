// Package resources describes the resources leasehold serves. A Resource is
// plain data plus a few functions (validation, defaulting, table columns);
// the registry implements every verb once, driven by these descriptions.
// Adding a resource is adding a description, not a new code path.
//
// The descriptions of the served kinds live in the sub-packages lease,
// endpoints and namespace. metadata.go holds what they share: ObjectMeta
// validation with kube-apiserver's exact error lists (ValidateObjectMeta,
// ValidateObjectMetaUpdate, and ValidateCreate/ValidateUpdate, which add the
// generic checks kube-apiserver's rest package runs around every kind's own),
// and the Name and Age table columns.
package resources
