package resources

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"
)

// Object is a served API object: a typed Go struct with ObjectMeta.
type Object interface {
	metav1.Object
	runtime.Object
}

// Kind describes one kind of stored object, composed of small parts: how
// it is named, where it is stored, the group versions it is served at, the
// rules of its writes, how it shows as a table and which field selectors
// it supports. Descriptions are built once and never modified.
type Kind struct {
	Names Names
	// Namespaced kinds live under /namespaces/{namespace}/; the others
	// are cluster-scoped.
	Namespaced bool
	// Verbs lists the verbs served, in discovery order (alphabetical);
	// nil means AllVerbs.
	Verbs []string
	// KeyPath is where the kind's objects are stored below the store's
	// prefix, laid out as kube-apiserver does ("leases",
	// "services/endpoints"): KeyPath/NAMESPACE/NAME or KeyPath/NAME.
	KeyPath string
	// Versions are the group versions the kind is served at, the
	// preferred first. Versions[0] is the storage version: objects are
	// stored, cached, checked and prepared in it, and converted to and
	// from the others at the edges.
	Versions []Version
	// Strategy checks and prepares objects on writes.
	Strategy Strategy
	// Updates says how a PUT treats a missing object and a missing
	// resourceVersion.
	Updates UpdatePolicy
	// Finalization, when set, replaces the generic rule of what a delete
	// does to an object that must wait (its metadata.finalizers are not
	// empty): a namespace is always marked Terminating first, and waits
	// for its spec.finalizers too.
	Finalization *Finalization
	// ResetFields lists the top-level fields that server-side apply on the
	// main resource does not own, because a subresource writes them (a
	// namespace's "status").
	ResetFields []string
	// Subresources are served below an object's path; only get, update
	// and patch.
	Subresources []Subresource
	Table        Table
	Fields       Fields
	// ReadDecoded says the server reads the kind's objects decoded on
	// many requests (the RBAC authorizer reads bindings and roles to
	// authorize each one): the watch cache keeps them decoded, rather than
	// decoding their stored bytes on each read.
	ReadDecoded bool
	// TTL, when positive, is how long an object lives after its last
	// write: the store deletes it then, as kube-apiserver's registry has
	// etcd do for Events (--event-ttl). Every create and update starts it
	// again; an update that changes nothing writes nothing and does not.
	TTL time.Duration
}

// Names are the names of a kind on the wire.
type Names struct {
	Kind, ListKind   string
	Plural, Singular string
	ShortNames       []string
}

// Version is one group version a kind is served at.
type Version struct {
	schema.GroupVersion
	// New returns an empty object of the version's type; NewList an empty
	// list.
	New     func() Object
	NewList func() runtime.Object
	// Default applies the version's defaults to a decoded object, as
	// decoding does in kube-apiserver (for request bodies and patched
	// objects). May be nil.
	Default func(Object)
	// Conversion converts to and from the storage version; nil for the
	// storage version itself.
	Conversion *Conversion
	// OpenAPI returns the OpenAPI definitions of the version's types and
	// of every type they reference (openapi-gen's output).
	OpenAPI common.GetOpenAPIDefinitions
}

// Conversion converts objects between a version and the storage version.
type Conversion struct {
	// ToStorage converts an object of the version into a new object of
	// the storage version; FromStorage the other way. Neither may modify
	// or keep in, which may be shared.
	ToStorage   func(in Object) (Object, error)
	FromStorage func(in Object) (Object, error)
	// FieldLabels, when set, lists the version's field selector labels,
	// each mapped to the storage version's (events.k8s.io's
	// "regarding.name" is core's "involvedObject.name"); nil means the
	// storage version's labels.
	FieldLabels map[string]string
}

// UpdatePolicy holds kube-apiserver's two update switches of a kind.
type UpdatePolicy struct {
	// AllowCreateOnUpdate: a PUT to a missing name creates the object.
	AllowCreateOnUpdate bool
	// AllowUnconditionalUpdate: a PUT without metadata.resourceVersion
	// overwrites the stored object instead of failing with 422.
	AllowUnconditionalUpdate bool
}

// Finalization is what a kind adds to the deletion of its objects.
type Finalization struct {
	// Holds reports whether a delete of obj (its metadata.finalizers
	// empty) must only mark it, and whether an update of an object being
	// deleted must keep it.
	Holds func(obj Object) bool
	// MarkDeleting marks obj as being deleted at now, in place of the
	// generic marking (deletionTimestamp, deletionGracePeriodSeconds 0,
	// generation bumped).
	MarkDeleting func(obj Object, now time.Time)
}

// Subresource is served at /{name}/{subresource} of an object.
type Subresource struct {
	Name string
	// Verbs lists what it serves: update, and optionally get and patch.
	Verbs    []string
	Strategy UpdateStrategy
	// ResetFields lists the top-level fields server-side apply through
	// the subresource does not own (a namespace status update's "spec").
	ResetFields []string
}

// Table describes the server-side table (as=Table) of a kind.
type Table struct {
	Columns []metav1.TableColumnDefinition
	// Row returns one cell per column for an object of the storage
	// version.
	Row func(obj Object, now time.Time) []any
}

// Fields describes the field selectors a kind supports.
type Fields struct {
	// Labels lists the supported labels, in the storage version's terms.
	Labels []string
	// Value returns an object's value of a label (storage version).
	Value func(obj Object, label string) string
}

// AllVerbs lists every verb a kind can serve.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// ServedVerbs returns the verbs the kind serves.
func (k *Kind) ServedVerbs() []string {
	if k.Verbs == nil {
		return AllVerbs
	}
	return k.Verbs
}

// Serves reports whether the kind serves verb.
func (k *Kind) Serves(verb string) bool { return slices.Contains(k.ServedVerbs(), verb) }

// Subresource returns the named subresource, nil when there is none.
func (k *Kind) Subresource(name string) *Subresource {
	for i := range k.Subresources {
		if k.Subresources[i].Name == name {
			return &k.Subresources[i]
		}
	}
	return nil
}

// Storage is the kind at its storage version.
func (k *Kind) Storage() Resource { return Resource{Kind: k, Version: &k.Versions[0]} }

// Resources lists the kind at every served version.
func (k *Kind) Resources() []Resource {
	out := make([]Resource, len(k.Versions))
	for i := range k.Versions {
		out[i] = Resource{Kind: k, Version: &k.Versions[i]}
	}
	return out
}

// StorageVersionHash is the discovery hash of the storage version, as
// kube-apiserver computes it: base64 of the first 8 bytes of
// sha256("<group>/<version>/<kind>"). Every served version shares it.
func (k *Kind) StorageVersionHash() string {
	gv := k.Versions[0].GroupVersion
	sum := sha256.Sum256([]byte(gv.Group + "/" + gv.Version + "/" + k.Names.Kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// Check reports what makes a description unusable; the server refuses to
// start with one.
func (k *Kind) Check() error {
	switch {
	case k.Names.Kind == "" || k.Names.ListKind == "" || k.Names.Plural == "" || k.Names.Singular == "":
		return fmt.Errorf("resources: kind %q: names incomplete", k.Names.Kind)
	case k.KeyPath == "":
		return fmt.Errorf("resources: kind %s: no KeyPath", k.Names.Kind)
	case len(k.Versions) == 0:
		return fmt.Errorf("resources: kind %s: no version", k.Names.Kind)
	case k.Strategy == nil || k.Table.Row == nil || k.Fields.Value == nil:
		return fmt.Errorf("resources: kind %s: strategy, table or fields missing", k.Names.Kind)
	}
	for i, v := range k.Versions {
		if v.New == nil || v.NewList == nil || v.OpenAPI == nil {
			return fmt.Errorf("resources: kind %s %s: New, NewList or OpenAPI missing", k.Names.Kind, v.GroupVersion)
		}
		if (i == 0) != (v.Conversion == nil) {
			return fmt.Errorf("resources: kind %s %s: only versions other than the storage version convert", k.Names.Kind, v.GroupVersion)
		}
	}
	return nil
}

// Resource is a kind served at one group version: what a request path
// names (/apis/GROUP/VERSION/PLURAL). It is a small value, passed by
// value.
type Resource struct {
	Kind    *Kind
	Version *Version
}

// GroupVersion returns the resource's group version.
func (r Resource) GroupVersion() schema.GroupVersion { return r.Version.GroupVersion }

// GroupVersionKind returns the kind of the resource's objects.
func (r Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.Version.WithKind(r.Kind.Names.Kind)
}

// ListGroupVersionKind returns the kind of the resource's lists.
func (r Resource) ListGroupVersionKind() schema.GroupVersionKind {
	return r.Version.WithKind(r.Kind.Names.ListKind)
}

// GroupVersionResource names the resource.
func (r Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.Version.WithResource(r.Kind.Names.Plural)
}

// GroupResource names the resource in errors ("leases.coordination.k8s.io").
func (r Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Version.Group, Resource: r.Kind.Names.Plural}
}

// APIVersion is the apiVersion field of the resource's objects.
func (r Resource) APIVersion() string { return r.Version.GroupVersion.String() }

// IsStorage reports whether the resource is at the kind's storage version.
func (r Resource) IsStorage() bool { return r.Version.Conversion == nil }

// New returns an empty object of the resource's version.
func (r Resource) New() Object { return r.Version.New() }

// ToStorage converts an object of the resource's version to the storage
// version; at the storage version it returns obj itself.
func (r Resource) ToStorage(obj Object) (Object, error) {
	if r.Version.Conversion == nil {
		return obj, nil
	}
	return r.Version.Conversion.ToStorage(obj)
}

// FromStorage converts an object of the storage version to the
// resource's version; at the storage version it returns obj itself.
func (r Resource) FromStorage(obj Object) (Object, error) {
	if r.Version.Conversion == nil {
		return obj, nil
	}
	return r.Version.Conversion.FromStorage(obj)
}

// Default applies the version's defaults.
func (r Resource) Default(obj Object) {
	if r.Version.Default != nil {
		r.Version.Default(obj)
	}
}

// Find returns the kind of kinds with the given group and kind name, at
// any of its versions; nil when none is.
func Find(kinds []*Kind, gk schema.GroupKind) *Kind {
	for _, k := range kinds {
		if k.Names.Kind != gk.Kind {
			continue
		}
		for _, v := range k.Versions {
			if v.Group == gk.Group {
				return k
			}
		}
	}
	return nil
}

// VersionIndex is the position of the resource's version in its kind's
// Versions (0 for the storage version).
func (r Resource) VersionIndex() int {
	for i := range r.Kind.Versions {
		if &r.Kind.Versions[i] == r.Version {
			return i
		}
	}
	panic(fmt.Sprintf("resources: version %s is not one of kind %s", r.Version.GroupVersion, r.Kind.Names.Kind))
}

// Protobuf reports whether the resource's objects have a protobuf
// encoding (every k8s.io/api type has one; a custom type may not, and is
// then served and stored in JSON only, as kube-apiserver serves custom
// resources).
func (r Resource) Protobuf() bool {
	if ok, known := protobufVersions.Load(r.Version); known {
		return ok.(bool)
	}
	_, ok := r.New().(interface{ Marshal() ([]byte, error) })
	protobufVersions.Store(r.Version, ok)
	return ok
}

// protobufVersions remembers Protobuf's answer by *Version: every
// request body asks, and making an object to find out was 3% of what a
// renewal allocated.
var protobufVersions sync.Map
