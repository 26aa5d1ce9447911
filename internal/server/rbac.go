package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/auth"
	"github.com/leasehold/leasehold/internal/controllers/clusterroleaggregation"
	"github.com/leasehold/leasehold/internal/rbac"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// Authorization modes (kube-apiserver's --authorization-mode values that
// leasehold has).
const (
	ModeRBAC        = "RBAC"
	ModeABAC        = "ABAC"
	ModeAlwaysAllow = "AlwaysAllow"
)

// AuthorizationModes returns the modes cfg asks for, checked as
// kube-apiserver checks them: by default RBAC, or ABAC alone when only a
// policy file is given (leasehold's behaviour before
// --authorization-mode). explicit reports whether the modes were given.
func AuthorizationModes(cfg Config) (modes []string, explicit bool, err error) {
	if len(cfg.AuthorizationModes) == 0 {
		if cfg.AuthorizationPolicyFile != "" {
			return []string{ModeABAC}, false, nil
		}
		return []string{ModeRBAC}, false, nil
	}
	var errs []error
	for _, m := range cfg.AuthorizationModes {
		switch m {
		case ModeRBAC, ModeABAC, ModeAlwaysAllow:
		case "AlwaysDeny", "Node", "Webhook":
			errs = append(errs, fmt.Errorf("authorization-mode %q is not supported by leasehold (use %s, %s or %s)", m, ModeRBAC, ModeABAC, ModeAlwaysAllow))
		default:
			errs = append(errs, fmt.Errorf("authorization-mode %q is not a valid mode", m))
		}
	}
	if slices.Contains(cfg.AuthorizationModes, ModeABAC) && cfg.AuthorizationPolicyFile == "" {
		errs = append(errs, errors.New("authorization-mode ABAC's authorization policy file not passed"))
	}
	if !slices.Contains(cfg.AuthorizationModes, ModeABAC) && cfg.AuthorizationPolicyFile != "" {
		errs = append(errs, errors.New("cannot specify --authorization-policy-file without mode ABAC"))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(cfg.AuthorizationModes)))) != len(cfg.AuthorizationModes) {
		errs = append(errs, fmt.Errorf("authorization-mode %q has mode specified more than once", cfg.AuthorizationModes))
	}
	return cfg.AuthorizationModes, true, errors.Join(errs...)
}

// authorizer builds the authorizer of cfg's modes. src is the RBAC
// objects, read once the registry exists.
func (s *Server) authorizer(cfg Config, reload auth.Reload, src *rbacSource) (*auth.Authorizer, error) {
	modes, explicit, err := AuthorizationModes(cfg)
	if err != nil {
		return nil, err
	}
	var ms []auth.Mode
	if !slices.Contains(modes, ModeRBAC) {
		// Without RBAC, the default bindings' rules still apply.
		ms = append(ms, auth.DefaultRules())
	}
	for _, m := range modes {
		switch m {
		case ModeRBAC:
			ms = append(ms, rbac.NewAuthorizer(src))
		case ModeABAC:
			policies, err := auth.NewPolicyFile(cfg.AuthorizationPolicyFile, reload)
			if err != nil {
				return nil, err
			}
			s.reloaders = append(s.reloaders, policies.Run)
			ms = append(ms, auth.ABAC(policies))
		case ModeAlwaysAllow:
			ms = append(ms, auth.AlwaysAllow())
		}
	}
	switch {
	case !explicit && modes[0] == ModeABAC:
		s.log.Info("authorization: ABAC with --authorization-policy-file, as given without --authorization-mode; " +
			"add --authorization-mode=RBAC,ABAC to also use RBAC roles and bindings")
	case slices.Contains(modes, ModeAlwaysAllow):
		s.log.Warn("NO AUTHORIZATION: --authorization-mode includes AlwaysAllow, so every request is allowed, the anonymous user's too", "modes", strings.Join(modes, ","))
	case slices.Contains(modes, ModeRBAC):
		s.log.Info("authorization: "+strings.Join(modes, ",")+"; users other than system:masters (the admin kubeconfig) may do nothing until bound to a role. "+
			"To let a leader-election client renew one lease: "+
			"kubectl create role lease-holder -n NS --verb=get,update --resource=leases.coordination.k8s.io --resource-name=LEASE; "+
			"kubectl create rolebinding lease-holder -n NS --role=lease-holder --user=USER",
			"modes", strings.Join(modes, ","))
	}
	return auth.NewAuthorizer(ms...), nil
}

// escalationStep is the admission step that keeps users from granting
// what they do not hold.
func escalationStep(authz *auth.Authorizer, src *rbacSource) admission.Step {
	return admission.RBACEscalation{Authorizer: authz, Resolver: src.consistentResolver}
}

// rbacSource reads roles and bindings from the registry's caches. The
// authorizer reads the latest cached state, which may trail a write by
// the cache's lag (kube-apiserver's informers trail too); escalation
// checks read a consistent state.
type rbacSource struct {
	// reg is set once the registry exists, before any request.
	reg atomic.Pointer[registry.Registry]
	// The served RBAC kinds, set with reg.
	roles, clusterRoles, roleBindings, clusterRoleBindings resources.Resource
}

var _ rbac.Source = (*rbacSource)(nil)

// bind points the source at reg. It fails when reg does not serve the
// RBAC kinds.
func (s *rbacSource) bind(reg *registry.Registry) error {
	find := func(kind string) (resources.Resource, error) {
		res, ok := reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: kind})
		if !ok {
			return res, fmt.Errorf("RBAC authorization needs %s, which is not served", kind)
		}
		return res, nil
	}
	var err error
	if s.roles, err = find("Role"); err != nil {
		return err
	}
	if s.clusterRoles, err = find("ClusterRole"); err != nil {
		return err
	}
	if s.roleBindings, err = find("RoleBinding"); err != nil {
		return err
	}
	if s.clusterRoleBindings, err = find("ClusterRoleBinding"); err != nil {
		return err
	}
	s.reg.Store(reg)
	return nil
}

func (s *rbacSource) snapshot(res resources.Resource) (registry.Snapshot, bool) {
	reg := s.reg.Load()
	if reg == nil {
		return registry.Snapshot{}, false
	}
	return reg.Snapshot(res)
}

func (s *rbacSource) Role(namespace, name string) (*rbacv1.Role, bool) {
	snap, ok := s.snapshot(s.roles)
	if !ok {
		return nil, false
	}
	o, ok := snap.Get(namespace, name)
	if !ok {
		return nil, false
	}
	return o.(*rbacv1.Role), true
}

func (s *rbacSource) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	snap, ok := s.snapshot(s.clusterRoles)
	if !ok {
		return nil, false
	}
	o, ok := snap.Get("", name)
	if !ok {
		return nil, false
	}
	return o.(*rbacv1.ClusterRole), true
}

func (s *rbacSource) RoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool) {
	if snap, ok := s.snapshot(s.roleBindings); ok {
		snap.Each(namespace, func(o resources.Object) bool { return fn(o.(*rbacv1.RoleBinding)) })
	}
}

func (s *rbacSource) ClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool) {
	if snap, ok := s.snapshot(s.clusterRoleBindings); ok {
		snap.Each("", func(o resources.Object) bool { return fn(o.(*rbacv1.ClusterRoleBinding)) })
	}
}

// consistentResolver returns a resolver over a consistent state of the
// RBAC objects, reporting missing roles as request.
func (s *rbacSource) consistentResolver(ctx context.Context, request schema.GroupResource) (*rbac.Resolver, error) {
	reg := s.reg.Load()
	if reg == nil {
		return nil, errors.New("RBAC objects are not served")
	}
	var snaps snapshotSource
	for _, x := range []struct {
		res  resources.Resource
		into *registry.Snapshot
	}{{s.roles, &snaps.roles}, {s.clusterRoles, &snaps.clusterRoles}, {s.roleBindings, &snaps.roleBindings}, {s.clusterRoleBindings, &snaps.clusterRoleBindings}} {
		snap, err := reg.ConsistentSnapshot(ctx, x.res)
		if err != nil {
			return nil, err
		}
		*x.into = snap
	}
	return rbac.NewRequestResolver(&snaps, request), nil
}

// snapshotSource reads fixed snapshots.
type snapshotSource struct {
	roles, clusterRoles, roleBindings, clusterRoleBindings registry.Snapshot
}

func (s *snapshotSource) Role(namespace, name string) (*rbacv1.Role, bool) {
	o, ok := s.roles.Get(namespace, name)
	if !ok {
		return nil, false
	}
	return o.(*rbacv1.Role), true
}

func (s *snapshotSource) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	o, ok := s.clusterRoles.Get("", name)
	if !ok {
		return nil, false
	}
	return o.(*rbacv1.ClusterRole), true
}

func (s *snapshotSource) RoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool) {
	s.roleBindings.Each(namespace, func(o resources.Object) bool { return fn(o.(*rbacv1.RoleBinding)) })
}

func (s *snapshotSource) ClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool) {
	s.clusterRoleBindings.Each("", func(o resources.Object) bool { return fn(o.(*rbacv1.ClusterRoleBinding)) })
}

// bootstrapTimeout bounds how long ensureRBACPolicy keeps trying, as
// kube-apiserver's rbac/bootstrap-roles hook does before it gives up.
const bootstrapTimeout = 30 * time.Second

// rbacManager is the field manager of the bootstrap policy's writes.
const rbacManager = "leasehold"

// ensureRBACPolicy creates the bootstrap ClusterRoles and
// ClusterRoleBindings, or reconciles them as kube-apiserver does at every
// start (pkg/registry/rbac/rest/storage_rbac.go, with
// k8s.io/component-helpers' reconciliation): missing rules and subjects
// are added, nothing is removed, and an object annotated
// rbac.authorization.kubernetes.io/autoupdate=false is left alone. It
// retries each second for up to 30 s, then fails. Nothing is done when
// the RBAC kinds are not served.
func (s *Server) ensureRBACPolicy(ctx context.Context) error {
	roles, ok1 := s.reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"})
	bindings, ok2 := s.reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"})
	if !ok1 || !ok2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	m := &rbacModifier{ctx: ctx, reg: s.reg, roles: roles, bindings: bindings}
	for {
		err := s.reconcileRBACPolicy(m)
		if err == nil {
			// One pass of the aggregation controller, so that admin,
			// edit and view have their rules from the start.
			err = clusterroleaggregation.AggregateAll(ctx, s.reg, s.log)
		}
		if err == nil {
			return nil
		}
		s.log.Warn("reconciling the bootstrap RBAC policy; retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("unable to initialize roles: %w", err)
		case <-time.After(time.Second):
		}
	}
}

func (s *Server) reconcileRBACPolicy(m *rbacModifier) error {
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err) }
	var errs []error
	for _, role := range rbac.ClusterRoles() {
		opts := reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &role},
			Client:  m,
			Confirm: true,
		}
		err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
			result, err := opts.Run()
			if err != nil {
				return err
			}
			switch {
			case result.Protected && result.Operation != reconciliation.ReconcileNone:
				s.log.Warn("skipped reconcile-protected clusterrole with missing permissions", "clusterrole", role.Name, "missing", fmt.Sprint(result.MissingRules))
			case result.Operation == reconciliation.ReconcileUpdate:
				s.log.Info("updated clusterrole with additional permissions", "clusterrole", role.Name, "missing", fmt.Sprint(result.MissingRules))
			case result.Operation == reconciliation.ReconcileCreate:
				s.log.Debug("created clusterrole", "clusterrole", role.Name)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("clusterrole.%s/%s: %w", rbacv1.GroupName, role.Name, err))
		}
	}
	for _, binding := range rbac.ClusterRoleBindings() {
		opts := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &binding},
			Client:      bindingModifier{m},
			Confirm:     true,
		}
		err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
			result, err := opts.Run()
			if err != nil {
				return err
			}
			switch {
			case result.Protected && result.Operation != reconciliation.ReconcileNone:
				s.log.Warn("skipped reconcile-protected clusterrolebinding with missing subjects", "clusterrolebinding", binding.Name, "missing", fmt.Sprint(result.MissingSubjects))
			case result.Operation == reconciliation.ReconcileUpdate:
				s.log.Info("updated clusterrolebinding with additional subjects", "clusterrolebinding", binding.Name, "missing", fmt.Sprint(result.MissingSubjects))
			case result.Operation == reconciliation.ReconcileCreate, result.Operation == reconciliation.ReconcileRecreate:
				s.log.Debug(string(result.Operation)+"d clusterrolebinding", "clusterrolebinding", binding.Name)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("clusterrolebinding.%s/%s: %w", rbacv1.GroupName, binding.Name, err))
		}
	}
	return errors.Join(errs...)
}

// rbacModifier reads and writes ClusterRoles (and, through
// bindingModifier, ClusterRoleBindings) through the registry, for
// reconciliation.
type rbacModifier struct {
	ctx             context.Context
	reg             *registry.Registry
	roles, bindings resources.Resource
}

var _ reconciliation.RuleOwnerModifier = (*rbacModifier)(nil)

func (m *rbacModifier) Get(_, name string) (reconciliation.RuleOwner, error) {
	c, err := m.reg.Get(m.ctx, m.roles, "", name, "")
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: c.Object().(*rbacv1.ClusterRole).DeepCopy()}, nil
}

func (m *rbacModifier) Create(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	out, err := m.reg.Create(m.ctx, m.roles, "", in.GetObject().(*rbacv1.ClusterRole).DeepCopy(), registry.WriteOptions{Manager: rbacManager})
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: out.Object.(*rbacv1.ClusterRole)}, nil
}

func (m *rbacModifier) Update(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r := in.GetObject().(*rbacv1.ClusterRole).DeepCopy()
	out, err := m.reg.Update(m.ctx, m.roles, "", r.Name, "", r, registry.WriteOptions{Manager: rbacManager})
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: out.Object.(*rbacv1.ClusterRole)}, nil
}

type bindingModifier struct{ m *rbacModifier }

var _ reconciliation.RoleBindingModifier = bindingModifier{}

func (b bindingModifier) Get(_, name string) (reconciliation.RoleBinding, error) {
	c, err := b.m.reg.Get(b.m.ctx, b.m.bindings, "", name, "")
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: c.Object().(*rbacv1.ClusterRoleBinding).DeepCopy()}, nil
}

func (b bindingModifier) Create(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	out, err := b.m.reg.Create(b.m.ctx, b.m.bindings, "", in.GetObject().(*rbacv1.ClusterRoleBinding).DeepCopy(), registry.WriteOptions{Manager: rbacManager})
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: out.Object.(*rbacv1.ClusterRoleBinding)}, nil
}

func (b bindingModifier) Update(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	r := in.GetObject().(*rbacv1.ClusterRoleBinding).DeepCopy()
	out, err := b.m.reg.Update(b.m.ctx, b.m.bindings, "", r.Name, "", r, registry.WriteOptions{Manager: rbacManager})
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: out.Object.(*rbacv1.ClusterRoleBinding)}, nil
}

func (b bindingModifier) Delete(_, name string, uid types.UID) error {
	_, err := b.m.reg.Delete(b.m.ctx, b.m.bindings, "", name, deleteOptionsWithUID(uid))
	return err
}

// deleteOptionsWithUID is a delete precondition on the object's uid.
func deleteOptionsWithUID(uid types.UID) *metav1.DeleteOptions {
	return &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// authorizationModes are the modes in force, as AuthorizationModes
// decides them; nil when they are not valid.
func (c Config) authorizationModes() []string {
	modes, _, err := AuthorizationModes(c)
	if err != nil {
		return nil
	}
	return modes
}
