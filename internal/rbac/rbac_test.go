package rbac

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/auth"
)

// staticSource is a Source over slices of objects, for tests.
type staticSource struct {
	roles               []*rbacv1.Role
	clusterRoles        []*rbacv1.ClusterRole
	roleBindings        []*rbacv1.RoleBinding
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

func (s *staticSource) Role(ns, name string) (*rbacv1.Role, bool) {
	for _, r := range s.roles {
		if r.Namespace == ns && r.Name == name {
			return r, true
		}
	}
	return nil, false
}

func (s *staticSource) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	for _, r := range s.clusterRoles {
		if r.Name == name {
			return r, true
		}
	}
	return nil, false
}

func (s *staticSource) RoleBindings(ns string, fn func(*rbacv1.RoleBinding) bool) {
	for _, b := range s.roleBindings {
		if b.Namespace == ns && !fn(b) {
			return
		}
	}
}

func (s *staticSource) ClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool) {
	for _, b := range s.clusterRoleBindings {
		if !fn(b) {
			return
		}
	}
}

func user(name string, groups ...string) auth.User {
	return auth.User{Name: name, Groups: append(groups, auth.AllAuthenticated)}
}

// bootstrapSource holds the bootstrap policy, aggregated as the
// controller would, plus extra objects.
func bootstrapSource(t *testing.T) *staticSource {
	t.Helper()
	s := &staticSource{}
	roles := ClusterRoles()
	for i := range roles {
		s.clusterRoles = append(s.clusterRoles, &roles[i])
	}
	// Aggregate until nothing changes (edit feeds admin).
	for changed := true; changed; {
		changed = false
		for _, r := range s.clusterRoles {
			rules, ok, err := Aggregate(r, s.clusterRoles)
			if err != nil {
				t.Fatal(err)
			}
			if ok && len(rules) != len(r.Rules) {
				r.Rules, changed = rules, true
			}
		}
	}
	bindings := ClusterRoleBindings()
	for i := range bindings {
		s.clusterRoleBindings = append(s.clusterRoleBindings, &bindings[i])
	}
	return s
}

// The bootstrap policy is kube-apiserver's, as its own golden files
// (extracted in testdata) say.
func TestBootstrapPolicyIsUpstreams(t *testing.T) {
	var roles rbacv1.ClusterRoleList
	data, err := os.ReadFile("testdata/cluster-roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &roles); err != nil {
		t.Fatal(err)
	}
	got := ClusterRoles()
	byName := func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(got, byName)
	for i := range roles.Items {
		roles.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	if diff := cmp.Diff(roles.Items, got); diff != "" {
		t.Errorf("cluster roles (-upstream +ours):\n%s", diff)
	}
	var bindings rbacv1.ClusterRoleBindingList
	if data, err = os.ReadFile("testdata/cluster-role-bindings.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &bindings); err != nil {
		t.Fatal(err)
	}
	gotBindings := ClusterRoleBindings()
	slices.SortFunc(gotBindings, func(a, b rbacv1.ClusterRoleBinding) int { return strings.Compare(a.Name, b.Name) })
	for i := range bindings.Items {
		bindings.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	if diff := cmp.Diff(bindings.Items, gotBindings); diff != "" {
		t.Errorf("cluster role bindings (-upstream +ours):\n%s", diff)
	}
}

func TestAuthorize(t *testing.T) {
	src := bootstrapSource(t)
	src.roles = []*rbacv1.Role{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "leader"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "update"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"my-lock"}},
			{Verbs: []string{"create"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}},
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*/status"}},
		},
	}}
	src.roleBindings = []*rbacv1.RoleBinding{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "leader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Name: "ctrl"}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "dangling"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "missing"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "devs"}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "viewers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "readers"}},
		},
	}
	z := NewAuthorizer(src)
	lease := func(u auth.User, verb, ns, name string) auth.Attributes {
		return auth.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: ns, Name: name}
	}
	alice, sa := user("alice"), user("system:serviceaccount:apps:ctrl")
	dev, reader := user("dave", "devs"), user("rita", "readers")
	cases := []struct {
		name   string
		a      auth.Attributes
		allow  bool
		reason string
	}{
		{"renew the named lease", lease(alice, "update", "apps", "my-lock"), true, `RBAC: allowed by RoleBinding "leader/apps" of Role "leader" to User "alice"`},
		{"get the named lease", lease(alice, "get", "apps", "my-lock"), true, `RBAC: allowed by RoleBinding "leader/apps" of Role "leader" to User "alice"`},
		{"another lease", lease(alice, "update", "apps", "other"), false, ""},
		{"delete the named lease", lease(alice, "delete", "apps", "my-lock"), false, ""},
		{"create any lease", lease(alice, "create", "apps", ""), true, `RBAC: allowed by RoleBinding "leader/apps" of Role "leader" to User "alice"`},
		{"another namespace", lease(alice, "update", "other", "my-lock"), false, ""},
		{"list across namespaces", lease(alice, "list", "", ""), false, ""},
		{"a service account in the binding's namespace", lease(sa, "update", "apps", "my-lock"), true, `RBAC: allowed by RoleBinding "leader/apps" of Role "leader" to ServiceAccount "ctrl/apps"`},
		{"*/status", auth.Attributes{User: alice, Verb: "get", ResourceRequest: true, Resource: "namespaces", Subresource: "status", Namespace: "apps", Name: "apps"}, true, `RBAC: allowed by RoleBinding "leader/apps" of Role "leader" to User "alice"`},
		{"*/status is not the resource", auth.Attributes{User: alice, Verb: "get", ResourceRequest: true, Resource: "namespaces", Namespace: "apps", Name: "apps"}, false, ""},
		{"a binding to a missing role", lease(dev, "get", "apps", "x"), false, `RBAC: role.rbac.authorization.k8s.io "missing" not found`},
		{"view through aggregation", lease(reader, "list", "apps", ""), false, ""},
		{"view reads endpoints", auth.Attributes{User: reader, Verb: "list", ResourceRequest: true, Resource: "endpoints", Namespace: "apps"}, true, `RBAC: allowed by RoleBinding "viewers/apps" of ClusterRole "view" to Group "readers"`},
		{"discovery", auth.Attributes{User: alice, Verb: "get", Path: "/apis/coordination.k8s.io/v1"}, true, `RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"the anonymous user reads /version", auth.Attributes{User: auth.User{Name: auth.Anonymous, Groups: []string{auth.AllUnauthenticated}}, Verb: "get", Path: "/version"}, true, `RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:unauthenticated"`},
		{"but not /apis", auth.Attributes{User: auth.User{Name: auth.Anonymous, Groups: []string{auth.AllUnauthenticated}}, Verb: "get", Path: "/apis"}, false, ""},
		{"system:masters through cluster-admin", lease(auth.User{Name: "root", Groups: []string{auth.SystemPrivilegedGroup}}, "delete", "x", "y"), true, `RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := z.Authorize(tc.a)
			if (d == auth.DecisionAllow) != tc.allow || reason != tc.reason {
				t.Errorf("decision %v %q, want allow=%v %q", d, reason, tc.allow, tc.reason)
			}
		})
	}
	// The rules of a user with a dangling binding come with the error.
	rules, err := z.RulesFor(dev, "apps")
	if err == nil || err.Error() != `role.rbac.authorization.k8s.io "missing" not found` || len(rules.NonResource) == 0 {
		t.Errorf("RulesFor dave: %+v %v", rules, err)
	}
	rules, err = z.RulesFor(alice, "apps")
	if err != nil || !slices.ContainsFunc(rules.Resource, func(r auth.ResourceRule) bool {
		return slices.Equal(r.ResourceNames, []string{"my-lock"}) && slices.Equal(r.Verbs, []string{"get", "update"})
	}) {
		t.Errorf("RulesFor alice: %+v %v", rules, err)
	}
}

func TestAggregation(t *testing.T) {
	src := bootstrapSource(t)
	admin, _ := src.ClusterRole("admin")
	edit, _ := src.ClusterRole("edit")
	has := func(r *rbacv1.ClusterRole, group, resource, verb string) bool {
		return slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool {
			return slices.Contains(p.APIGroups, group) && slices.Contains(p.Resources, resource) && slices.Contains(p.Verbs, verb)
		})
	}
	for _, c := range []struct {
		role             *rbacv1.ClusterRole
		group, res, verb string
		want             bool
	}{
		{edit, "coordination.k8s.io", "leases", "update", true},
		{edit, "", "events", "create", true},
		{edit, "", "events", "patch", true},
		{edit, "rbac.authorization.k8s.io", "roles", "create", false},
		{admin, "coordination.k8s.io", "leases", "delete", true},
		{admin, "rbac.authorization.k8s.io", "rolebindings", "create", true},
		{admin, "", "namespaces", "get", true},
	} {
		if got := has(c.role, c.group, c.res, c.verb); got != c.want {
			t.Errorf("%s: %s %s/%s = %v, want %v", c.role.Name, c.verb, c.group, c.res, got, c.want)
		}
	}
	// Rules are taken once, in the order of the selected roles' names.
	a := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}}
	r1 := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"a"}}
	r2 := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"b"}}
	roles := []*rbacv1.ClusterRole{
		a,
		{ObjectMeta: metav1.ObjectMeta{Name: "z", Labels: map[string]string{"x": "y"}}, Rules: []rbacv1.PolicyRule{r1, r2}},
		{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"x": "y"}}, Rules: []rbacv1.PolicyRule{r2}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"x": "n"}}, Rules: []rbacv1.PolicyRule{r1}},
	}
	got, ok, err := Aggregate(a, roles)
	if !ok || err != nil || !cmp.Equal(got, []rbacv1.PolicyRule{r2, r1}) {
		t.Errorf("aggregate: %v %v %v", got, ok, err)
	}
}

func TestConfirmNoEscalation(t *testing.T) {
	src := bootstrapSource(t)
	src.roles = []*rbacv1.Role{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "leader"},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"my-lock"}}},
	}}
	src.roleBindings = []*rbacv1.RoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "leader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}},
	}}
	r := NewRequestResolver(src, schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"})
	alice := user("alice")
	held := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"my-lock"}}}
	if err := ConfirmNoEscalation(r, alice, "apps", held); err != nil {
		t.Errorf("held rules: %v", err)
	}
	more := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "update", "delete", "patch"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"my-lock"}},
		{Verbs: []string{"list"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}},
	}
	err := ConfirmNoEscalation(r, alice, "apps", more)
	want := `user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["coordination.k8s.io"], Resources:["leases"], ResourceNames:["my-lock"], Verbs:["delete" "patch"]}
{APIGroups:["coordination.k8s.io"], Resources:["leases"], Verbs:["list"]}
{NonResourceURLs:["/metrics"], Verbs:["get"]}`
	if err == nil || err.Error() != want {
		t.Errorf("escalation error:\n%v\nwant:\n%s", err, want)
	}
	// Elsewhere alice holds nothing but the defaults.
	if err := ConfirmNoEscalation(r, alice, "other", held); err == nil {
		t.Error("no error in another namespace")
	}
}

func TestServiceAccountNames(t *testing.T) {
	for _, c := range []struct {
		user, ns, name string
		want           bool
	}{
		{"system:serviceaccount:ns:sa", "ns", "sa", true},
		{"system:serviceaccount:ns:sa", "ns", "s", false},
		{"system:serviceaccount:nsx:sa", "ns", "xsa", false},
		{"system:serviceaccount:ns-sa", "ns", "sa", false},
		{"alice", "ns", "sa", false},
	} {
		if got := isServiceAccount(c.user, c.ns, c.name); got != c.want {
			t.Errorf("isServiceAccount(%q, %q, %q) = %v", c.user, c.ns, c.name, got)
		}
	}
}

// BenchmarkAuthorize is the authorizer's cost on a renewal: a user bound
// by a RoleBinding to get and update leases, beside the bootstrap
// bindings.
func BenchmarkAuthorize(b *testing.B) {
	src := bootstrapSourceB(b)
	src.roles = []*rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "renewer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}}}}
	src.roleBindings = []*rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "renewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "renewer"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "bench"}}}}
	z := NewAuthorizer(src)
	a := auth.Attributes{User: user("bench"), Verb: "update", ResourceRequest: true, APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: "default", Name: "lease-000001"}
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := z.Authorize(a); d != auth.DecisionAllow {
			b.Fatal("refused")
		}
	}
}

func bootstrapSourceB(b *testing.B) *staticSource {
	s := &staticSource{}
	roles := ClusterRoles()
	for i := range roles {
		s.clusterRoles = append(s.clusterRoles, &roles[i])
	}
	bindings := ClusterRoleBindings()
	for i := range bindings {
		s.clusterRoleBindings = append(s.clusterRoleBindings, &bindings[i])
	}
	return s
}
