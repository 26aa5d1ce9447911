package rbac

import (
	"fmt"
	"strconv"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/leasehold/leasehold/internal/auth"
)

// Source reads the stored Roles, ClusterRoles and bindings. The objects
// it gives are shared: callers must not modify them. found is false for a
// missing object.
type Source interface {
	Role(namespace, name string) (role *rbacv1.Role, found bool)
	ClusterRole(name string) (role *rbacv1.ClusterRole, found bool)
	// RoleBindings calls fn with each RoleBinding of namespace until fn
	// returns false.
	RoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool)
	// ClusterRoleBindings calls fn with each ClusterRoleBinding until fn
	// returns false.
	ClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool)
}

// Resolver finds the rules that apply to users. It is safe for
// concurrent use when its Source is.
type Resolver struct {
	src Source
	// notFound, when set, is the resource missing roles are reported as.
	notFound *schema.GroupResource
}

// NewResolver returns a Resolver over src whose errors for missing roles
// are worded as kube-apiserver's RBAC authorizer words them (its
// informer listers: `clusterrole.rbac.authorization.k8s.io "x" not
// found`).
func NewResolver(src Source) *Resolver { return &Resolver{src: src} }

// NewRequestResolver returns a Resolver whose errors for missing roles
// name the resource of the request being checked, as the escalation
// checks of kube-apiserver's RBAC registry report them: its storage names
// the resource of the request's context, so a RoleBinding to a missing
// ClusterRole is `rolebindings.rbac.authorization.k8s.io "x" not found`.
func NewRequestResolver(src Source, request schema.GroupResource) *Resolver {
	return &Resolver{src: src, notFound: &request}
}

// Visitor receives each rule that applies to a user, or an error
// resolving one binding's role; source is the binding that grants the
// rule. It returns false to stop.
type Visitor func(source RuleSource, rule *rbacv1.PolicyRule, err error) bool

// RuleSource is the binding, and its subject, that grants a rule. It
// is a value, so that visiting rules allocates nothing for it.
type RuleSource struct {
	clusterBinding *rbacv1.ClusterRoleBinding
	binding        *rbacv1.RoleBinding
	subject        *rbacv1.Subject
}

// String describes the source as kube-apiserver's describers do in the
// reasons of its decisions: `RoleBinding "name/ns" of Role "r" to User
// "u"`, `ClusterRoleBinding "name" of ClusterRole "r" to Group "g"`.
func (s RuleSource) String() string {
	b := make([]byte, 0, 128)
	var ref rbacv1.RoleRef
	ns := ""
	if s.clusterBinding != nil {
		b = append(b, "ClusterRoleBinding "...)
		b = strconv.AppendQuote(b, s.clusterBinding.Name)
		ref = s.clusterBinding.RoleRef
	} else {
		b = append(b, "RoleBinding "...)
		b = strconv.AppendQuote(b, s.binding.Name+"/"+s.binding.Namespace)
		ref, ns = s.binding.RoleRef, s.binding.Namespace
	}
	b = append(b, " of "...)
	b = append(b, ref.Kind...)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, ref.Name)
	b = append(b, " to "...)
	b = append(b, s.subject.Kind...)
	b = append(b, ' ')
	name := s.subject.Name
	if s.subject.Kind == rbacv1.ServiceAccountKind {
		if s.subject.Namespace != "" {
			ns = s.subject.Namespace
		}
		name += "/" + ns
	}
	b = strconv.AppendQuote(b, name)
	return string(b)
}

// VisitRulesFor calls visit with each rule that applies to u in namespace
// ("" for cluster-wide requests): the rules of the ClusterRoleBindings
// first, then those of namespace's RoleBindings, as kube-apiserver's
// DefaultRuleResolver does.
func (r *Resolver) VisitRulesFor(u auth.User, namespace string, visit Visitor) {
	stop := false
	r.src.ClusterRoleBindings(func(b *rbacv1.ClusterRoleBinding) bool {
		i, ok := appliesTo(u, b.Subjects, "")
		if !ok {
			return true
		}
		rules, err := r.RoleReferenceRules(b.RoleRef, "")
		if err != nil {
			stop = !visit(RuleSource{}, nil, err)
			return !stop
		}
		src := RuleSource{clusterBinding: b, subject: &b.Subjects[i]}
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				stop = true
				return false
			}
		}
		return true
	})
	if stop || namespace == "" {
		return
	}
	r.src.RoleBindings(namespace, func(b *rbacv1.RoleBinding) bool {
		i, ok := appliesTo(u, b.Subjects, namespace)
		if !ok {
			return true
		}
		rules, err := r.RoleReferenceRules(b.RoleRef, namespace)
		if err != nil {
			return visit(RuleSource{}, nil, err)
		}
		src := RuleSource{binding: b, subject: &b.Subjects[i]}
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return false
			}
		}
		return true
	})
}

// RulesFor returns every rule that applies to u in namespace. When some
// binding's role cannot be found, the error says so, and the rules are
// those that could be resolved: rules only ever allow, so a decision can
// still be made from them.
func (r *Resolver) RulesFor(u auth.User, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	r.VisitRulesFor(u, namespace, func(_ RuleSource, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// RoleReferenceRules returns the rules of the role a binding in
// namespace ("" for a ClusterRoleBinding) refers to.
func (r *Resolver) RoleReferenceRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, ok := r.src.Role(namespace, ref.Name)
		if !ok {
			return nil, r.notFoundError("role", ref.Name)
		}
		return role.Rules, nil
	case "ClusterRole":
		role, ok := r.src.ClusterRole(ref.Name)
		if !ok {
			return nil, r.notFoundError("clusterrole", ref.Name)
		}
		return role.Rules, nil
	default:
		return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
	}
}

func (r *Resolver) notFoundError(resource, name string) error {
	if r.notFound != nil {
		return apierrors.NewNotFound(*r.notFound, name)
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, name)
}

// appliesTo returns the index of the first subject that is u, when one
// is. namespace is the binding's ("" for a ClusterRoleBinding): a service
// account subject without a namespace is in it.
func appliesTo(u auth.User, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i := range subjects {
		if appliesToUser(u, &subjects[i], namespace) {
			return i, true
		}
	}
	return 0, false
}

func appliesToUser(u auth.User, s *rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.Name == s.Name
	case rbacv1.GroupKind:
		return u.InGroup(s.Name)
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return ns != "" && isServiceAccount(u.Name, ns, s.Name)
	}
	return false
}

// serviceAccountPrefix starts the user name of a service account,
// "system:serviceaccount:NAMESPACE:NAME".
const serviceAccountPrefix = "system:serviceaccount:"

// isServiceAccount reports whether user is the service account name of
// namespace, without building its user name (apiserver's
// serviceaccount.MatchesUsername).
func isServiceAccount(user, namespace, name string) bool {
	if len(user) != len(serviceAccountPrefix)+len(namespace)+1+len(name) {
		return false
	}
	rest, ok := cutPrefix(user, serviceAccountPrefix)
	if !ok {
		return false
	}
	rest, ok = cutPrefix(rest, namespace)
	if !ok || rest == "" || rest[0] != ':' {
		return false
	}
	return rest[1:] == name
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return s, false
	}
	return s[len(prefix):], true
}
