package resources

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// UpdateStrategy checks and prepares an update. Its methods receive
// objects of the kind's storage version, which they must not keep.
type UpdateStrategy interface {
	// PrepareForUpdate resets what the update may not change, copying it
	// from old.
	PrepareForUpdate(obj, old Object)
	// ValidateUpdate checks obj against old, metadata included. in is the
	// group version of the request.
	ValidateUpdate(obj, old Object, in schema.GroupVersion) field.ErrorList
}

// Strategy checks and prepares a kind's objects on writes, as
// kube-apiserver's REST strategies do. Its methods receive objects of the
// storage version, which they must not keep.
type Strategy interface {
	UpdateStrategy
	// PrepareForCreate resets what a client may not set on create (status,
	// gated fields).
	PrepareForCreate(obj Object)
	// Validate checks a new object, metadata included. in is the group
	// version of the request: some kinds check more in newer versions.
	Validate(obj Object, in schema.GroupVersion) field.ErrorList
	// Warnings returns warnings for a create (old nil) or an update.
	Warnings(obj, old Object) []string
}

// Unprepared is embedded by the strategies of kinds that store objects as
// sent: nothing to reset on create or update.
type Unprepared struct{}

func (Unprepared) PrepareForCreate(Object)      {}
func (Unprepared) PrepareForUpdate(_, _ Object) {}

// NoWarnings is embedded by the strategies of kinds that never warn.
type NoWarnings struct{}

func (NoWarnings) Warnings(_, _ Object) []string { return nil }
