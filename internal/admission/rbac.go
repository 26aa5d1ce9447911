package admission

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/rbac"
	"github.com/leasehold/leasehold/internal/resources"
)

// Authorizer decides requests, for steps that authorize a verb other
// than the request's own.
type Authorizer interface {
	Authorize(a auth.Attributes) (auth.Decision, string)
}

// RBACEscalation is kube-apiserver's escalation prevention for RBAC
// objects (pkg/registry/rbac/{role,clusterrole,rolebinding,
// clusterrolebinding}/policybased, escalation_check.go): a user may create
// or update a Role or ClusterRole only with rules they hold themselves,
// and a binding only to a role whose rules they hold, unless they are
// explicitly allowed the "escalate" verb on the role (or "bind" on the
// bound role), or are in system:masters. Changing only ownerReferences or
// finalizers is always allowed. Setting or changing a ClusterRole's
// aggregationRule needs every permission ("*" on everything). The checks
// read the stored roles as of the write (a consistent read), and refuse
// with kube-apiserver's 403 and its list of what is missing. Writes the
// server makes itself (no user: bootstrap, aggregation) pass.
type RBACEscalation struct {
	Authorizer Authorizer
	// Resolver returns a resolver over the stored RBAC objects, as a
	// consistent read sees them, that reports missing roles as request
	// (the resource written).
	Resolver func(ctx context.Context, request schema.GroupResource) (*rbac.Resolver, error)
}

// fullAuthority is what the aggregationRule of a ClusterRole needs.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Admit implements Step.
func (e RBACEscalation) Admit(ctx context.Context, _ Reader, req *Request) error {
	if req.Operation != Create && req.Operation != Update || req.Resource.Version.Group != rbacv1.GroupName {
		return nil
	}
	u, ok := auth.UserFrom(ctx)
	if !ok || u.InGroup(auth.SystemPrivilegedGroup) {
		return nil
	}
	if req.Operation == Update && onlyGCFields(req.Object, req.Old) {
		return nil
	}
	gr := req.Resource.GroupResource()
	switch obj := req.Object.(type) {
	case *rbacv1.Role:
		if e.escalateAllowed(ctx, u, req) {
			return nil
		}
		return e.confirm(ctx, u, req.Namespace, gr, obj.Name, obj.Rules)
	case *rbacv1.ClusterRole:
		if e.escalateAllowed(ctx, u, req) {
			return nil
		}
		if err := e.confirm(ctx, u, "", gr, obj.Name, obj.Rules); err != nil {
			return err
		}
		old, _ := req.Old.(*rbacv1.ClusterRole)
		if hasAggregationRule(obj) || old != nil && hasAggregationRule(old) {
			if err := e.confirm(ctx, u, "", gr, obj.Name, fullAuthority); err != nil {
				return apierrors.NewForbidden(gr, obj.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case *rbacv1.RoleBinding:
		return e.confirmBinding(ctx, u, req.Namespace, gr, obj.Name, obj.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.confirmBinding(ctx, u, "", gr, obj.Name, obj.RoleRef)
	}
	return nil
}

// escalateAllowed reports whether u may escalate the role the request
// writes: RoleEscalationAuthorized, which asks about the request's own
// resource, name and namespace.
func (e RBACEscalation) escalateAllowed(ctx context.Context, u auth.User, req *Request) bool {
	a, ok := auth.RequestFrom(ctx)
	if !ok || !a.ResourceRequest || a.APIGroup != rbacv1.GroupName || a.Resource != "roles" && a.Resource != "clusterroles" {
		return false
	}
	d, _ := e.Authorizer.Authorize(auth.Attributes{
		User: u, Verb: "escalate", ResourceRequest: true,
		APIGroup: a.APIGroup, APIVersion: "*", Resource: a.Resource, Name: a.Name, Namespace: a.Namespace,
	})
	return d == auth.DecisionAllow
}

// confirmBinding lets u bind ref in namespace ("" for a
// ClusterRoleBinding) when u may "bind" the role, or holds its rules.
// A role that does not exist is a 404 naming the binding's resource, as
// in kube-apiserver.
func (e RBACEscalation) confirmBinding(ctx context.Context, u auth.User, namespace string, gr schema.GroupResource, name string, ref rbacv1.RoleRef) error {
	bind := auth.Attributes{User: u, Verb: "bind", ResourceRequest: true, Namespace: namespace, APIGroup: ref.APIGroup, APIVersion: "*", Name: ref.Name}
	switch ref.Kind {
	case "ClusterRole":
		bind.Resource = "clusterroles"
	case "Role":
		bind.Resource = "roles"
	}
	if bind.Resource != "" {
		if d, _ := e.Authorizer.Authorize(bind); d == auth.DecisionAllow {
			return nil
		}
	}
	r, err := e.Resolver(ctx, gr)
	if err != nil {
		return err
	}
	rules, err := r.RoleReferenceRules(ref, namespace)
	if err != nil {
		return err
	}
	if err := rbac.ConfirmNoEscalation(r, u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// confirm refuses rules u does not hold in namespace.
func (e RBACEscalation) confirm(ctx context.Context, u auth.User, namespace string, gr schema.GroupResource, name string, rules []rbacv1.PolicyRule) error {
	r, err := e.Resolver(ctx, gr)
	if err != nil {
		return err
	}
	if err := rbac.ConfirmNoEscalation(r, u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

func hasAggregationRule(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// onlyGCFields reports whether an update changes nothing but the fields
// the garbage collector writes (ownerReferences and finalizers), as
// kube-apiserver's IsOnlyMutatingGCFields.
func onlyGCFields(obj, old resources.Object) bool {
	if old == nil {
		return false
	}
	c := obj.DeepCopyObject().(resources.Object)
	c.SetOwnerReferences(old.GetOwnerReferences())
	c.SetFinalizers(old.GetFinalizers())
	c.SetSelfLink(old.GetSelfLink())
	c.SetManagedFields(old.GetManagedFields())
	return equality.Semantic.DeepEqual(c, old)
}
