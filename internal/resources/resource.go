package resources

import (
	"crypto/sha256"
	"encoding/base64"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Object is a served API object: a typed k8s.io/api struct.
type Object interface {
	metav1.Object
	runtime.Object
}

// Resource describes one served resource. The function fields receive
// objects of the resource's own type; they must not keep references to them.
type Resource struct {
	// Group, Version, Kind and Plural identify the resource on the wire.
	Group, Version string
	Kind, ListKind string
	Plural         string
	Singular       string
	ShortNames     []string
	// Namespaced resources live under /namespaces/{ns}/; the others are
	// cluster-scoped.
	Namespaced bool
	// Verbs lists the verbs served (discovery order: alphabetical); nil
	// means all of Verbs.
	Verbs []string
	// KeyPath is the storage path under the store prefix, as kube-apiserver
	// lays it out ("leases", "services/endpoints", "namespaces").
	KeyPath string

	// New returns an empty object of the kind; NewList an empty list.
	New     func() Object
	NewList func() runtime.Object

	// AllowCreateOnUpdate: a PUT to a missing name creates the object.
	AllowCreateOnUpdate bool
	// AllowUnconditionalUpdate: a PUT without metadata.resourceVersion
	// overwrites the stored object instead of failing with 422.
	AllowUnconditionalUpdate bool

	// Default applies the API version's defaults, as decoding does in
	// kube-apiserver. It runs on every decoded request body. May be nil.
	Default func(obj Object)
	// PrepareForCreate resets fields a client may not set on create (status,
	// gated fields). May be nil.
	PrepareForCreate func(obj Object)
	// PrepareForUpdate resets fields a client may not change on update,
	// copying them from old. May be nil.
	PrepareForUpdate func(obj, old Object)
	// Validate checks a new object, metadata included.
	Validate func(obj Object) field.ErrorList
	// ValidateUpdate checks an updated object against the stored one,
	// metadata included.
	ValidateUpdate func(obj, old Object) field.ErrorList
	// Warnings returns warnings for a create (old nil) or an update. May be
	// nil.
	Warnings func(obj, old Object) []string

	// Finalizing reports whether resource-specific finalization still holds
	// an object being deleted (a namespace with spec.finalizers). nil means
	// only metadata.finalizers count.
	Finalizing func(obj Object) bool

	// ResetFields lists the top-level fields that server-side apply on the
	// main resource does not own, because another endpoint writes them
	// (a namespace's "status").
	ResetFields []string

	// Subresources maps a subresource name ("status", "finalize") to its
	// update rules. Only update (and get) are served on subresources.
	Subresources map[string]Subresource

	// FieldLabels lists the field selector labels the resource supports,
	// and Field returns the value of one of them for an object.
	FieldLabels []string
	Field       func(obj Object, label string) string

	// Columns and Row describe the server-side table (as=Table). Row
	// returns one cell per column.
	Columns []metav1.TableColumnDefinition
	Row     func(obj Object, now time.Time) []any
}

// Subresource holds the update rules of a subresource.
type Subresource struct {
	// PrepareForUpdate copies from old everything the subresource may not
	// change.
	PrepareForUpdate func(obj, old Object)
	ValidateUpdate   func(obj, old Object) field.ErrorList
	// ResetFields lists the top-level fields server-side apply through the
	// subresource does not own (a namespace status update's "spec").
	ResetFields []string
}

// GroupVersion returns the resource's API group version.
func (r *Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupVersionKind returns the kind of the resource's objects.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion().WithKind(r.Kind)
}

// GroupResource names the resource in errors ("leases.coordination.k8s.io").
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Plural}
}

// APIVersion is the apiVersion field of the resource's objects.
func (r *Resource) APIVersion() string {
	return r.GroupVersion().String()
}

// StorageVersionHash is the discovery hash of the storage version, as
// kube-apiserver computes it: base64 of the first 8 bytes of
// sha256("<group>/<version>/<kind>").
func (r *Resource) StorageVersionHash() string {
	sum := sha256.Sum256([]byte(r.Group + "/" + r.Version + "/" + r.Kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// AllVerbs lists every verb a resource can serve.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// ServedVerbs returns the verbs the resource serves.
func (r *Resource) ServedVerbs() []string {
	if r.Verbs == nil {
		return AllVerbs
	}
	return r.Verbs
}

// Serves reports whether the resource serves verb.
func (r *Resource) Serves(verb string) bool {
	for _, v := range r.ServedVerbs() {
		if v == verb {
			return true
		}
	}
	return false
}

// MetadataField returns metadata.name or metadata.namespace, the field
// labels every kind supports.
func MetadataField(obj Object, label string) string {
	switch label {
	case "metadata.name":
		return obj.GetName()
	case "metadata.namespace":
		return obj.GetNamespace()
	}
	return ""
}
