package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// RBAC objects, as kubectl create role and rolebinding make them.
func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName},
		Subjects:   subjects,
	}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

func leaseRule(verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: names}
}

// waitAllowed waits until c's user may do what ra asks: the authorizer
// reads the cache, which trails writes by a moment.
func waitAllowed(t testing.TB, c kubernetes.Interface, ra *authorizationv1.ResourceAttributes) {
	t.Helper()
	waitFor(t, func() bool {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
}

// TestRBACLeaseHolder: a token user bound to a Role with get and update
// on one named Lease (the Role a leader-election client needs) renews it
// with client-go's leaderelection, and is refused every other lease and
// the delete, with kube-apiserver's 403 messages.
func TestRBACLeaseHolder(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	secNamespaces(t, admin, "apps")
	for _, name := range []string{"my-lock", "other"} {
		must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("apps").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
	}
	alice := secClient(t, s.tokenConfig("alice-token"))
	// Nothing before a binding.
	_, err := alice.CoordinationV1().Leases("apps").Get(t.Context(), "my-lock", metav1.GetOptions{})
	se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io "my-lock" is forbidden: User "alice" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`; se.ErrStatus.Message != want {
		t.Errorf("message %q, want %q", se.ErrStatus.Message, want)
	}

	must[*rbacv1.Role](t)(admin.RbacV1().Roles("apps").Create(t.Context(), role("apps", "lease-holder", leaseRule([]string{"get", "update"}, "my-lock")), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("apps").Create(t.Context(), roleBinding("apps", "lease-holder", "Role", "lease-holder", userSubject("alice")), metav1.CreateOptions{}))
	waitAllowed(t, alice, &authorizationv1.ResourceAttributes{Namespace: "apps", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "my-lock"})

	// client-go's leader election renews the lease.
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "apps", Name: "my-lock"},
		Client:     alice.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "alice-1"},
	}
	ctx, cancel := context.WithCancel(t.Context())
	led := make(chan struct{})
	done := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(led) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); le.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-led:
	case <-time.After(20 * time.Second):
		t.Fatal("alice never led")
	}
	first := must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("apps").Get(t.Context(), "my-lock", metav1.GetOptions{}))
	if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != "alice-1" {
		t.Fatalf("holder %v", first.Spec.HolderIdentity)
	}
	waitFor(t, func() bool {
		l := must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("apps").Get(t.Context(), "my-lock", metav1.GetOptions{}))
		return l.ResourceVersion != first.ResourceVersion && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	})

	// Everything else is refused.
	leases := alice.CoordinationV1().Leases("apps")
	forbidden := func(what string, err error, want string) {
		t.Helper()
		se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
		if se.ErrStatus.Message != want {
			t.Errorf("%s: %q, want %q", what, se.ErrStatus.Message, want)
		}
	}
	_, err = leases.Get(t.Context(), "other", metav1.GetOptions{})
	forbidden("get another lease", err, `leases.coordination.k8s.io "other" is forbidden: User "alice" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`)
	other := must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("apps").Get(t.Context(), "other", metav1.GetOptions{}))
	other.Spec.HolderIdentity = ptr("alice-1")
	_, err = leases.Update(t.Context(), other, metav1.UpdateOptions{})
	forbidden("take over another lease", err, `leases.coordination.k8s.io "other" is forbidden: User "alice" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`)
	err = leases.Delete(t.Context(), "my-lock", metav1.DeleteOptions{})
	forbidden("delete the lease", err, `leases.coordination.k8s.io "my-lock" is forbidden: User "alice" cannot delete resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`)
	_, err = leases.List(t.Context(), metav1.ListOptions{})
	forbidden("list leases", err, `leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`)
	_, err = alice.CoordinationV1().Leases("default").Get(t.Context(), "my-lock", metav1.GetOptions{})
	forbidden("the same name elsewhere", err, `leases.coordination.k8s.io "my-lock" is forbidden: User "alice" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "default"`)
	// A binding to a role that is gone: the reason says so.
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("apps").Create(t.Context(), roleBinding("apps", "dangling", "Role", "gone", userSubject("alice")), metav1.CreateOptions{}))
	waitFor(t, func() bool {
		_, err := leases.Get(t.Context(), "other", metav1.GetOptions{})
		return apierrors.IsForbidden(err) && strings.HasSuffix(err.Error(), `: RBAC: role.rbac.authorization.k8s.io "gone" not found`)
	})
}

// TestRBACClusterWide: a ClusterRole bound by a ClusterRoleBinding grants
// lists across every namespace; bound by a RoleBinding, in one.
func TestRBACClusterWide(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	secNamespaces(t, admin, "a", "b")
	for _, ns := range []string{"a", "b"} {
		must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases(ns).Create(t.Context(), secLease("l"), metav1.CreateOptions{}))
	}
	must[*rbacv1.ClusterRole](t)(admin.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("lease-reader", leaseRule([]string{"get", "list", "watch"})), metav1.CreateOptions{}))
	must[*rbacv1.ClusterRoleBinding](t)(admin.RbacV1().ClusterRoleBindings().Create(t.Context(), clusterRoleBinding("bob-reads-leases", "lease-reader", userSubject("bob")), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("a").Create(t.Context(), roleBinding("a", "wanda-reads-leases", "ClusterRole", "lease-reader", userSubject("wanda")), metav1.CreateOptions{}))
	bob, wanda := secClient(t, s.tokenConfig("bob-token")), secClient(t, s.tokenConfig("watcher-token"))
	waitAllowed(t, bob, &authorizationv1.ResourceAttributes{Verb: "list", Group: "coordination.k8s.io", Resource: "leases"})
	l := must[*coordinationv1.LeaseList](t)(bob.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{}))
	if len(l.Items) != 2 {
		t.Errorf("bob lists %d leases, want 2", len(l.Items))
	}
	w := must[interface{ Stop() }](t)(bob.CoordinationV1().Leases("").Watch(t.Context(), metav1.ListOptions{}))
	w.Stop()
	if _, err := bob.CoreV1().Endpoints("").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bob lists endpoints: %v", err)
	}
	waitAllowed(t, wanda, &authorizationv1.ResourceAttributes{Namespace: "a", Verb: "list", Group: "coordination.k8s.io", Resource: "leases"})
	if _, err := wanda.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("wanda lists across namespaces: %v", err)
	}
	if _, err := wanda.CoordinationV1().Leases("b").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("wanda lists in b: %v", err)
	}
}

// TestRBACAggregation: a ClusterRole labelled to aggregate to view adds
// its rules to view, and through it to edit and admin; deleting it takes
// them away.
func TestRBACAggregation(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	roles := admin.RbacV1().ClusterRoles()
	// The bootstrap aggregation is done before the server is ready.
	edit := must[*rbacv1.ClusterRole](t)(roles.Get(t.Context(), "edit", metav1.GetOptions{}))
	if !slices.ContainsFunc(edit.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "leases") && slices.Contains(r.Verbs, "update")
	}) || !slices.ContainsFunc(edit.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == "clusterrole-aggregation-controller" }) {
		t.Errorf("edit at start: %+v", edit)
	}
	// Aggregation nests (admin gathers edit, which gathers view): at start
	// admin and edit already hold every rule of view.
	view := must[*rbacv1.ClusterRole](t)(roles.Get(t.Context(), "view", metav1.GetOptions{}))
	adminRole := must[*rbacv1.ClusterRole](t)(roles.Get(t.Context(), "admin", metav1.GetOptions{}))
	for _, outer := range []*rbacv1.ClusterRole{edit, adminRole} {
		for _, r := range view.Rules {
			if !slices.ContainsFunc(outer.Rules, func(p rbacv1.PolicyRule) bool { return cmpRule(p, r) }) {
				t.Errorf("%s at start lacks view's rule %+v", outer.Name, r)
			}
		}
	}
	widgets := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	extra := clusterRole("widget-viewer", widgets)
	extra.Labels = map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}
	must[*rbacv1.ClusterRole](t)(roles.Create(t.Context(), extra, metav1.CreateOptions{}))
	hasWidgets := func(name string) bool {
		r := must[*rbacv1.ClusterRole](t)(roles.Get(t.Context(), name, metav1.GetOptions{}))
		return slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return cmpRule(p, widgets) })
	}
	for _, name := range []string{"view", "edit", "admin"} {
		waitFor(t, func() bool { return hasWidgets(name) })
	}
	if err := roles.Delete(t.Context(), "widget-viewer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"view", "edit", "admin"} {
		waitFor(t, func() bool { return !hasWidgets(name) })
	}
}

func cmpRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// TestRBACEscalation: a namespace admin may grant what they hold and
// nothing more, with kube-apiserver's message, unless allowed to escalate
// or bind.
func TestRBACEscalation(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	secNamespaces(t, admin, "team")
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("team").Create(t.Context(), roleBinding("team", "bob-admin", "ClusterRole", "admin", userSubject("bob")), metav1.CreateOptions{}))
	bob := secClient(t, s.tokenConfig("bob-token"))
	waitAllowed(t, bob, &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "roles"})
	roles, bindings := bob.RbacV1().Roles("team"), bob.RbacV1().RoleBindings("team")

	// What admin holds, bob may grant.
	must[*rbacv1.Role](t)(roles.Create(t.Context(), role("team", "holder", leaseRule([]string{"get", "update"}, "x")), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(bindings.Create(t.Context(), roleBinding("team", "holder", "Role", "holder", userSubject("alice")), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(bindings.Create(t.Context(), roleBinding("team", "viewers", "ClusterRole", "view", userSubject("alice")), metav1.CreateOptions{}))

	// More is refused.
	candidates := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leasecandidates"}}
	_, err := roles.Create(t.Context(), role("team", "too-much", candidates, leaseRule([]string{"get"})), metav1.CreateOptions{})
	se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	want := `roles.rbac.authorization.k8s.io "too-much" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["coordination.k8s.io"], Resources:["leasecandidates"], Verbs:["get" "list"]}`
	if se.ErrStatus.Message != want {
		t.Errorf("escalating role:\n%s\nwant:\n%s", se.ErrStatus.Message, want)
	}
	_, err = bindings.Create(t.Context(), roleBinding("team", "root", "ClusterRole", "cluster-admin", userSubject("alice")), metav1.CreateOptions{})
	se = wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	want = `rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["*"], Resources:["*"], Verbs:["*"]}
{NonResourceURLs:["*"], Verbs:["*"]}`
	if se.ErrStatus.Message != want {
		t.Errorf("escalating binding:\n%s\nwant:\n%s", se.ErrStatus.Message, want)
	}
	// An update that adds what bob lacks is refused too.
	holder := must[*rbacv1.Role](t)(roles.Get(t.Context(), "holder", metav1.GetOptions{}))
	holder.Rules = append(holder.Rules, candidates)
	if _, err := roles.Update(t.Context(), holder, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("escalating update: %v", err)
	}
	// A binding to a missing role is a 404, worded as kube-apiserver's
	// storage words it, with the resource of the request.
	_, err = bindings.Create(t.Context(), roleBinding("team", "nothing", "ClusterRole", "nope", userSubject("alice")), metav1.CreateOptions{})
	se = wantStatus(t, err, http.StatusNotFound, metav1.StatusReasonNotFound)
	if want := `rolebindings.rbac.authorization.k8s.io "nope" not found`; se.ErrStatus.Message != want {
		t.Errorf("binding a missing role: %q", se.ErrStatus.Message)
	}

	// The escalate and bind verbs lift the checks.
	must[*rbacv1.ClusterRole](t)(admin.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("delegate",
		rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}},
		rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{"cluster-admin"}},
	), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings("team").Create(t.Context(), roleBinding("team", "bob-delegate", "ClusterRole", "delegate", userSubject("bob")), metav1.CreateOptions{}))
	waitAllowed(t, bob, &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "roles"})
	must[*rbacv1.Role](t)(roles.Create(t.Context(), role("team", "too-much", candidates), metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(bindings.Create(t.Context(), roleBinding("team", "root", "ClusterRole", "cluster-admin", userSubject("alice")), metav1.CreateOptions{}))

	// An aggregation rule gathers anything: only cluster admins may set it.
	must[*rbacv1.ClusterRole](t)(admin.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("role-maker",
		rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}},
	), metav1.CreateOptions{}))
	must[*rbacv1.ClusterRoleBinding](t)(admin.RbacV1().ClusterRoleBindings().Create(t.Context(), clusterRoleBinding("wanda-makes-roles", "role-maker", userSubject("wanda")), metav1.CreateOptions{}))
	wanda := secClient(t, s.tokenConfig("watcher-token"))
	waitAllowed(t, wanda, &authorizationv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"})
	aggregated := clusterRole("everything")
	aggregated.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}
	_, err = wanda.RbacV1().ClusterRoles().Create(t.Context(), aggregated, metav1.CreateOptions{})
	se = wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `clusterroles.rbac.authorization.k8s.io "everything" is forbidden: must have cluster-admin privileges to use the aggregationRule`; se.ErrStatus.Message != want {
		t.Errorf("aggregation rule: %q", se.ErrStatus.Message)
	}
	must[*rbacv1.ClusterRole](t)(wanda.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("nothing-much"), metav1.CreateOptions{}))
}

// TestImpersonation: Impersonate-* headers (client-go's Impersonate, as
// kubectl --as) act as another user once the legacy impersonate verb, or
// kube-apiserver 1.36's constrained impersonation verbs, allow it, with
// kube-apiserver's 403 and 400 otherwise.
func TestImpersonation(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	whoami := func(c kubernetes.Interface) (authenticationv1.UserInfo, error) {
		r, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, err
		}
		return r.Status.UserInfo, nil
	}
	as := func(token string, imp restImpersonation) kubernetes.Interface {
		cfg := s.tokenConfig(token)
		if token == "" {
			cfg = s.Config
		}
		cfg.Impersonate.UserName, cfg.Impersonate.UID, cfg.Impersonate.Groups, cfg.Impersonate.Extra = imp.user, imp.uid, imp.groups, imp.extra
		return secClient(t, cfg)
	}
	forbidden := func(err error, want string) {
		t.Helper()
		se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
		if se.ErrStatus.Message != want {
			t.Errorf("message %q, want %q", se.ErrStatus.Message, want)
		}
	}

	// Without any verb: the first mode's refusal (user-info, for bob).
	_, err := whoami(as("alice-token", restImpersonation{user: "bob"}))
	forbidden(err, `selfsubjectreviews.authentication.k8s.io is forbidden: User "alice" cannot impersonate-on:user-info:create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope`)
	// Groups without a user: 400.
	r := doAs(t, s.tokenConfig("alice-token"), s.URL(), "GET", "/api", map[string]string{"Impersonate-Group": "devs"}, nil)
	wantRawStatus(t, r, http.StatusBadRequest, "BadRequest", `requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"devs"}, Extra:map[string][]string(nil)} without impersonating a user name`)

	// The legacy verb: impersonate on users, groups, uids, extras.
	must[*rbacv1.ClusterRole](t)(admin.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("impersonator",
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"bob"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"groups"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"uids", "userextras/scopes"}},
	), metav1.CreateOptions{}))
	must[*rbacv1.ClusterRoleBinding](t)(admin.RbacV1().ClusterRoleBindings().Create(t.Context(), clusterRoleBinding("alice-impersonates", "impersonator", userSubject("alice")), metav1.CreateOptions{}))
	waitFor(t, func() bool { _, err := whoami(as("alice-token", restImpersonation{user: "bob"})); return err == nil })

	u, err := whoami(as("alice-token", restImpersonation{user: "bob", uid: "uid-b", groups: []string{"devs"}, extra: map[string][]string{"scopes": {"a", "b"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "bob" || u.UID != "uid-b" || !slices.Equal(u.Groups, []string{"devs", "system:authenticated"}) || !slices.Equal(u.Extra["scopes"], []string{"a", "b"}) {
		t.Errorf("alice as bob: %+v", u)
	}
	// Impersonating bob, alice has bob's rights, not hers.
	must[*rbacv1.ClusterRoleBinding](t)(admin.RbacV1().ClusterRoleBindings().Create(t.Context(), clusterRoleBinding("bob-views", "view", userSubject("bob")), metav1.CreateOptions{}))
	asBob := as("alice-token", restImpersonation{user: "bob"})
	waitFor(t, func() bool {
		_, err := asBob.CoreV1().Endpoints("default").List(t.Context(), metav1.ListOptions{})
		return err == nil
	})
	_, err = asBob.CoreV1().Endpoints("default").Create(t.Context(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
	forbidden(err, `endpoints is forbidden: User "bob" cannot create resource "endpoints" in API group "" in the namespace "default"`)
	// Another user: refused.
	_, err = whoami(as("alice-token", restImpersonation{user: "wanda"}))
	forbidden(err, `selfsubjectreviews.authentication.k8s.io is forbidden: User "alice" cannot impersonate-on:user-info:create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope`)

	// Constrained impersonation: wanda may get endpoints as bob (who may
	// read them), and do nothing else as him.
	must[*rbacv1.ClusterRole](t)(admin.RbacV1().ClusterRoles().Create(t.Context(), clusterRole("constrained",
		rbacv1.PolicyRule{Verbs: []string{"impersonate:user-info"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"users"}, ResourceNames: []string{"bob"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate-on:user-info:get"}, APIGroups: []string{""}, Resources: []string{"endpoints"}},
	), metav1.CreateOptions{}))
	must[*rbacv1.ClusterRoleBinding](t)(admin.RbacV1().ClusterRoleBindings().Create(t.Context(), clusterRoleBinding("wanda-constrained", "constrained", userSubject("wanda")), metav1.CreateOptions{}))
	must[*corev1.Endpoints](t)(admin.CoreV1().Endpoints("default").Create(t.Context(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}))
	wandaAsBob := as("watcher-token", restImpersonation{user: "bob"})
	waitFor(t, func() bool {
		_, err := wandaAsBob.CoreV1().Endpoints("default").Get(t.Context(), "e", metav1.GetOptions{})
		return err == nil
	})
	_, err = wandaAsBob.CoreV1().Endpoints("default").List(t.Context(), metav1.ListOptions{})
	forbidden(err, `endpoints is forbidden: User "wanda" cannot impersonate-on:user-info:list resource "endpoints" in API group "" in the namespace "default"`)
	// The constrained modes never impersonate system:masters.
	_, err = as("watcher-token", restImpersonation{user: "bob", groups: []string{"system:masters"}}).CoreV1().Endpoints("default").Get(t.Context(), "e", metav1.GetOptions{})
	forbidden(err, `groups.authentication.k8s.io "system:masters" is forbidden: User "wanda" cannot impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster scope: impersonating the system:masters group is not allowed`)

	// system:masters may impersonate anyone, a service account too.
	u, err = whoami(as("", restImpersonation{user: "system:serviceaccount:apps:ctrl"}))
	if err != nil || u.Username != "system:serviceaccount:apps:ctrl" || !slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"}) {
		t.Errorf("admin as a service account: %+v %v", u, err)
	}
}

type restImpersonation struct {
	user, uid string
	groups    []string
	extra     map[string][]string
}
