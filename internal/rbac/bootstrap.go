package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/auth"
)

// The bootstrap policy: kube-apiserver v1.36's default ClusterRoles and
// ClusterRoleBindings (plugin/pkg/auth/authorizer/rbac/bootstrappolicy,
// policy.go and testdata/cluster-roles.yaml) for what leasehold serves
// and the users it has: cluster-admin for system:masters, the discovery,
// basic-user, public-info-viewer and monitoring roles, and the
// user-facing admin, edit and view, aggregated from
// system:aggregate-to-{admin,edit,view}. Their rules are upstream's,
// word for word, including the resources leasehold does not serve, so
// that roles read and reconciled against kube-apiserver's compare equal.
// The roles of Kubernetes' own components (nodes, the scheduler, the
// controller manager, kube-proxy, ...) are left out: they do not talk to
// leasehold.

// Verb lists of the bootstrap policy.
var (
	readVerbs      = []string{"get", "list", "watch"}
	writeVerbs     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWriteVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

// Labels and annotations of the bootstrap objects.
const (
	// BootstrappingLabel marks the bootstrap objects, with value
	// "rbac-defaults".
	BootstrappingLabel = "kubernetes.io/bootstrapping"
	aggregateToAdmin   = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit    = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView    = "rbac.authorization.k8s.io/aggregate-to-view"
)

// ruleBuilder builds a rule with sorted lists, as rbacv1helpers'
// PolicyRuleBuilder does.
type ruleBuilder struct{ r rbacv1.PolicyRule }

func newRule(verbs ...string) *ruleBuilder {
	return &ruleBuilder{rbacv1.PolicyRule{Verbs: slices.Clone(verbs)}}
}

func (b *ruleBuilder) groups(g ...string) *ruleBuilder {
	b.r.APIGroups = append(b.r.APIGroups, g...)
	return b
}
func (b *ruleBuilder) resources(r ...string) *ruleBuilder {
	b.r.Resources = append(b.r.Resources, r...)
	return b
}
func (b *ruleBuilder) urls(u ...string) *ruleBuilder {
	b.r.NonResourceURLs = append(b.r.NonResourceURLs, u...)
	return b
}

func (b *ruleBuilder) rule() rbacv1.PolicyRule {
	for _, l := range [][]string{b.r.Verbs, b.r.APIGroups, b.r.Resources, b.r.NonResourceURLs} {
		slices.Sort(l)
	}
	return b.r
}

func viewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		newRule(readVerbs...).groups("").resources("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps").rule(),
		newRule(readVerbs...).groups("").resources("limitranges", "resourcequotas", "bindings",
			"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log").rule(),
		newRule(readVerbs...).groups("").resources("namespaces").rule(),
		newRule(readVerbs...).groups("", "events.k8s.io").resources("events").rule(),
		newRule(readVerbs...).groups("discovery.k8s.io").resources("endpointslices").rule(),
		newRule(readVerbs...).groups("apps").resources("controllerrevisions",
			"statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status",
			"deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale").rule(),
		newRule(readVerbs...).groups("autoscaling").resources("horizontalpodautoscalers", "horizontalpodautoscalers/status").rule(),
		newRule(readVerbs...).groups("batch").resources("jobs", "cronjobs", "cronjobs/status", "jobs/status").rule(),
		newRule(readVerbs...).groups("extensions").resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
			"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
			"networkpolicies").rule(),
		newRule(readVerbs...).groups("policy").resources("poddisruptionbudgets", "poddisruptionbudgets/status").rule(),
		newRule(readVerbs...).groups("networking.k8s.io").resources("networkpolicies", "ingresses", "ingresses/status").rule(),
		newRule(readVerbs...).groups("resource.k8s.io").resources("resourceclaims", "resourceclaims/status", "resourceclaimtemplates").rule(),
	}
}

// editRules give leases every verb and events (core and events.k8s.io)
// create, update, patch and delete, as upstream's edit role does.
func editRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		newRule(readVerbs...).groups("").resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy").rule(),
		newRule("impersonate").groups("").resources("serviceaccounts").rule(),
		newRule(writeVerbs...).groups("").resources("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward").rule(),
		newRule("create").groups("").resources("pods/eviction").rule(),
		newRule(writeVerbs...).groups("").resources("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets").rule(),
		newRule("create").groups("").resources("serviceaccounts/token").rule(),
		newRule(writeVerbs...).groups("", "events.k8s.io").resources("events").rule(),
		newRule(writeVerbs...).groups("apps").resources(
			"statefulsets", "statefulsets/scale",
			"daemonsets",
			"deployments", "deployments/scale", "deployments/rollback",
			"replicasets", "replicasets/scale").rule(),
		newRule(writeVerbs...).groups("autoscaling").resources("horizontalpodautoscalers").rule(),
		newRule(writeVerbs...).groups("batch").resources("jobs", "cronjobs").rule(),
		newRule(writeVerbs...).groups("extensions").resources("daemonsets",
			"deployments", "deployments/scale", "deployments/rollback", "ingresses",
			"replicasets", "replicasets/scale", "replicationcontrollers/scale",
			"networkpolicies").rule(),
		newRule(writeVerbs...).groups("policy").resources("poddisruptionbudgets").rule(),
		newRule(writeVerbs...).groups("networking.k8s.io").resources("networkpolicies", "ingresses").rule(),
		newRule(readWriteVerbs...).groups("coordination.k8s.io").resources("leases").rule(),
		newRule(writeVerbs...).groups("resource.k8s.io").resources("resourceclaims", "resourceclaimtemplates").rule(),
	}
}

func aggregation(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

// defaultMeta is the metadata of a bootstrap object: the
// bootstrapping label and the autoupdate annotation (reconciled at every
// start unless an operator sets it to "false"), with extra labels.
func defaultMeta(name string, labels ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{BootstrappingLabel: "rbac-defaults"},
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
	}
	for _, l := range labels {
		m.Labels[l] = "true"
	}
	return m
}

// ClusterRoles returns the bootstrap ClusterRoles, fresh objects, in
// upstream's order.
func ClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		{ObjectMeta: defaultMeta("cluster-admin"), Rules: []rbacv1.PolicyRule{
			newRule("*").groups("*").resources("*").rule(),
			newRule("*").urls("*").rule(),
		}},
		{ObjectMeta: defaultMeta("system:discovery"), Rules: []rbacv1.PolicyRule{
			newRule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*").rule(),
		}},
		{ObjectMeta: defaultMeta("system:monitoring"), Rules: []rbacv1.PolicyRule{
			// /flagz and /statusz: their feature gates are on by default in v1.36.
			newRule("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*", "/flagz", "/statusz").rule(),
			newRule("get").groups("").resources("nodes/metrics").rule(),
		}},
		{ObjectMeta: defaultMeta("system:basic-user"), Rules: []rbacv1.PolicyRule{
			newRule("create").groups("authorization.k8s.io").resources("selfsubjectaccessreviews", "selfsubjectrulesreviews").rule(),
			newRule("create").groups("authentication.k8s.io").resources("selfsubjectreviews").rule(),
		}},
		{ObjectMeta: defaultMeta("system:public-info-viewer"), Rules: []rbacv1.PolicyRule{
			newRule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/").rule(),
		}},
		{ObjectMeta: defaultMeta("admin"), AggregationRule: aggregation(aggregateToAdmin)},
		{ObjectMeta: defaultMeta("edit", aggregateToAdmin), AggregationRule: aggregation(aggregateToEdit)},
		{ObjectMeta: defaultMeta("view", aggregateToEdit), AggregationRule: aggregation(aggregateToView)},
		{ObjectMeta: defaultMeta("system:aggregate-to-admin", aggregateToAdmin), Rules: []rbacv1.PolicyRule{
			newRule("create").groups("authorization.k8s.io").resources("localsubjectaccessreviews").rule(),
			newRule(readWriteVerbs...).groups("rbac.authorization.k8s.io").resources("roles", "rolebindings").rule(),
		}},
		{ObjectMeta: defaultMeta("system:aggregate-to-edit", aggregateToEdit), Rules: editRules()},
		{ObjectMeta: defaultMeta("system:aggregate-to-view", aggregateToView), Rules: viewRules()},
	}
}

// ClusterRoleBindings returns the bootstrap ClusterRoleBindings, fresh
// objects, in upstream's order.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	binding := func(role string, groups ...string) rbacv1.ClusterRoleBinding {
		b := rbacv1.ClusterRoleBinding{
			ObjectMeta: defaultMeta(role),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
		for _, g := range groups {
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
		}
		return b
	}
	return []rbacv1.ClusterRoleBinding{
		binding("cluster-admin", auth.SystemPrivilegedGroup),
		binding("system:monitoring", "system:monitoring"),
		binding("system:discovery", auth.AllAuthenticated),
		binding("system:basic-user", auth.AllAuthenticated),
		binding("system:public-info-viewer", auth.AllAuthenticated, auth.AllUnauthenticated),
	}
}
