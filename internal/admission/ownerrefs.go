package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/resources"
)

// OwnerReferences is kube-apiserver's OwnerReferencesPermissionEnforcement
// plugin (plugin/pkg/admission/gc): who changes an object's
// ownerReferences must be allowed to delete the object (a create is
// always allowed, since its author could as well not create it), and
// who makes a reference block its owner's deletion (blockOwnerDeletion
// true, new or turned on) must be allowed to update the owner's
// "finalizers" subresource: a foreground deletion of the owner waits for
// the dependent. kube-apiserver does not enable the plugin by default;
// leasehold always runs it, as the garbage collector honours
// blockOwnerDeletion. Writes the server makes itself (no user) pass.
type OwnerReferences struct {
	Authorizer Authorizer
	// Kinds are the served kinds, to find an owner's resource.
	Kinds []*resources.Kind
}

// Admit implements Step.
func (o OwnerReferences) Admit(ctx context.Context, _ Reader, req *Request) error {
	if req.Operation != Create && req.Operation != Update {
		return nil
	}
	u, ok := auth.UserFrom(ctx)
	if !ok || !changesOwners(req) {
		return nil
	}
	gr := req.Resource.GroupResource()
	if req.Operation != Create {
		a := auth.Attributes{
			User: u, Verb: "delete", ResourceRequest: true, Namespace: req.Namespace, Name: req.Name,
			APIGroup: req.Resource.Version.Group, APIVersion: req.Resource.Version.Version, Resource: req.Resource.Kind.Names.Plural,
		}
		if r, ok := auth.RequestFrom(ctx); ok {
			a.Subresource = r.Subresource
		}
		if d, reason := o.Authorizer.Authorize(a); d != auth.DecisionAllow {
			return apierrors.NewForbidden(gr, req.Name, fmt.Errorf("cannot set an ownerRef on a resource you can't delete: %v, %v", reason, nil))
		}
	}
	blocking := newlyBlocking(req)
	if len(blocking) == 0 {
		return nil
	}
	anything := auth.Attributes{User: u, Verb: "update", ResourceRequest: true, APIGroup: "*", APIVersion: "*", Resource: "*", Subresource: "finalizers", Name: "*"}
	if d, _ := o.Authorizer.Authorize(anything); d == auth.DecisionAllow {
		return nil
	}
	for _, ref := range blocking {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		k := resources.Find(o.Kinds, schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
		if err == nil && (k == nil || !servedAt(k, gv)) {
			err = fmt.Errorf("no matches for kind %q in version %q", ref.Kind, ref.APIVersion)
		}
		if err != nil {
			return apierrors.NewForbidden(gr, req.Name, fmt.Errorf("cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion %s Kind %s: %v", ref.APIVersion, ref.Kind, err))
		}
		a := auth.Attributes{
			User: u, Verb: "update", ResourceRequest: true, Name: ref.Name,
			APIGroup: gv.Group, APIVersion: gv.Version, Resource: k.Names.Plural, Subresource: "finalizers",
		}
		if k.Namespaced {
			a.Namespace = req.Namespace
		}
		if d, reason := o.Authorizer.Authorize(a); d != auth.DecisionAllow {
			return apierrors.NewForbidden(gr, req.Name, fmt.Errorf("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: %v, %v", reason, nil))
		}
	}
	return nil
}

// servedAt reports whether k is served at gv.
func servedAt(k *resources.Kind, gv schema.GroupVersion) bool {
	for _, v := range k.Versions {
		if v.GroupVersion == gv {
			return true
		}
	}
	return false
}

// changesOwners reports whether the write sets or changes references.
func changesOwners(req *Request) bool {
	refs := req.Object.GetOwnerReferences()
	if req.Old == nil {
		return len(refs) > 0
	}
	old := req.Old.GetOwnerReferences()
	if len(old) != len(refs) {
		return true
	}
	for i := range old {
		if !equality.Semantic.DeepEqual(old[i], refs[i]) {
			return true
		}
	}
	return false
}

// newlyBlocking returns the references that block their owner's
// deletion and did not before.
func newlyBlocking(req *Request) []metav1.OwnerReference {
	before := map[types.UID]bool{}
	if req.Old != nil {
		for _, r := range req.Old.GetOwnerReferences() {
			before[r.UID] = r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
		}
	}
	var out []metav1.OwnerReference
	for _, r := range req.Object.GetOwnerReferences() {
		if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion && !before[r.UID] {
			out = append(out, r)
		}
	}
	return out
}
