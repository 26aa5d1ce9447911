package rbac

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/resources"
)

// errorStrings renders errors as kube-apiserver's causes read.
func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

var gv = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}

func TestValidateRoles(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "r", Namespace: "ns"}
	leases := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"a"}}
	cases := []struct {
		name string
		obj  resources.Object
		want []string
	}{
		{"valid role", &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{leases}}, nil},
		{"names are path segments", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "a:b@c", Namespace: "ns"}}, nil},
		{"name with a slash", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "a/b", Namespace: "ns"}},
			[]string{`metadata.name: Invalid value: "a/b": may not contain '/'`}},
		{"role without namespace", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"}},
			[]string{`metadata.namespace: Required value`}},
		{"rule without verbs, groups, resources", &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{}}}, []string{
			`rules[0].verbs: Required value: verbs must contain at least one value`,
			`rules[0].apiGroups: Required value: resource rules must supply at least one api group`,
			`rules[0].resources: Required value: resource rules must supply at least one resource`,
		}},
		{"resource names with several resources are fine", &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"a", "b"}, ResourceNames: []string{"x"}}}}, nil},
		{"non-resource URL in a role", &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}}},
			[]string{`rules[0].nonResourceURLs: Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs`}},
		{"non-resource URL with resources", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, Resources: []string{"a"}}}},
			[]string{`rules[0].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs`}},
		{"cluster role with namespace", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
			[]string{`metadata.namespace: Forbidden: not allowed on this type`}},
		{"empty aggregation rule", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "c"}, AggregationRule: &rbacv1.AggregationRule{}},
			[]string{`aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil`}},
		{"bad aggregation selector", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "c"}, AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b c"}}}}},
			[]string{
				`aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				`aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var k *resources.Kind
			switch tc.obj.(type) {
			case *rbacv1.Role:
				k = NewRole()
			case *rbacv1.ClusterRole:
				k = NewClusterRole()
			}
			got := errorStrings(k.Strategy.Validate(tc.obj, gv))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateBindings(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "b", Namespace: "ns"}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}
	user := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}
	cases := []struct {
		name string
		obj  resources.Object
		want []string
	}{
		{"valid", &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{user, {Kind: "ServiceAccount", Name: "sa"}}}, nil},
		{"bad roleRef", &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: "x", Kind: "Pod"}}, []string{
			`roleRef.apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io"`,
			`roleRef.kind: Unsupported value: "Pod": supported values: "Role", "ClusterRole"`,
			`roleRef.name: Required value`,
		}},
		{"cluster binding to a role", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: ref},
			[]string{`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`}},
		{"subjects", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "c"}, Subjects: []rbacv1.Subject{
			{Kind: "ServiceAccount", Name: "Bad_Name", APIGroup: "x"},
			{Kind: "User", Name: "u"},
			{Kind: "Robot", Name: "r"},
			{Kind: "Group"},
		}}, []string{
			`subjects[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`subjects[0].apiGroup: Unsupported value: "x": supported values: ""`,
			`subjects[0].namespace: Required value`,
			`subjects[1].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`,
			`subjects[2].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`,
			`subjects[3].name: Required value`,
			`subjects[3].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := NewRoleBinding()
			if _, ok := tc.obj.(*rbacv1.ClusterRoleBinding); ok {
				k = NewClusterRoleBinding()
			}
			got := errorStrings(k.Strategy.Validate(tc.obj, gv))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The roleRef of a binding cannot change; an update reports it after the
// metadata checks.
func TestRoleRefImmutable(t *testing.T) {
	old := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", ResourceVersion: "1"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
	}
	changed := old.DeepCopy()
	changed.RoleRef.Name = "other"
	got := errorStrings(NewRoleBinding().Strategy.ValidateUpdate(changed, old, gv))
	want := []string{`roleRef: Invalid value: {"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"other"}: cannot change roleRef`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	b := &rbacv1.ClusterRoleBinding{
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "c"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}, {Kind: "Group", Name: "g"}, {Kind: "ServiceAccount", Name: "s", Namespace: "n"}},
	}
	NewClusterRoleBinding().Storage().Default(b)
	want := &rbacv1.ClusterRoleBinding{
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "c"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "u", APIGroup: rbacv1.GroupName},
			{Kind: "Group", Name: "g", APIGroup: rbacv1.GroupName},
			{Kind: "ServiceAccount", Name: "s", Namespace: "n"},
		},
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("defaulted (-want +got):\n%s", diff)
	}
}

func TestTables(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	created := metav1.NewTime(now.Add(-90 * time.Second))
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: created}}
	if got, want := NewClusterRole().Table.Row(role, now), []any{"c", "2026-01-02T03:02:35Z"}; !cmp.Equal(want, got) {
		t.Errorf("cluster role row %v, want %v", got, want)
	}
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: created},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "u1"}, {Kind: "User", Name: "u2"}, {Kind: "Group", Name: "g"},
			{Kind: "ServiceAccount", Namespace: "n", Name: "s"},
		},
	}
	if got, want := NewRoleBinding().Table.Row(b, now), []any{"b", "Role/r", "90s", "u1, u2", "g", "n/s"}; !cmp.Equal(want, got) {
		t.Errorf("binding row %v, want %v", got, want)
	}
	for _, k := range []*resources.Kind{NewRole(), NewRoleBinding(), NewClusterRole(), NewClusterRoleBinding()} {
		if err := k.Check(); err != nil {
			t.Error(err)
		}
	}
}
