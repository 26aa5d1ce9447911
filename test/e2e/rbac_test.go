package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const rbacTokens = "alice-token,alice,uid-alice,devs\nbob-token,bob,uid-bob\n"

// reconcileManifest is what a controller ships for its leader election,
// applied with kubectl auth reconcile.
const reconcileManifest = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: elector
  namespace: apps
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [elector]
  verbs: [get, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: elector
  namespace: apps
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: elector
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: bob
`

// TestKubectlRBAC: kubectl create role, rolebinding, clusterrole and
// clusterrolebinding, kubectl auth can-i (--list, --as) and kubectl auth
// reconcile against leasehold's RBAC, with kube-apiserver's tables.
func TestKubectlRBAC(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(rbacTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, func(c *server.Config) { c.TokenAuthFile = tokens })
	admin := newKubectl(t, s)
	alice := &kubectl{t: t, kubeconfig: userKubeconfig(t, s, "alice", "alice-token")}
	admin.ok("", "create", "namespace", "apps")
	admin.ok(leaseYAML, "-n", "apps", "create", "-f", "-")

	// Nothing before a binding, and kubectl says so.
	if out, _, err := alice.run("", "auth", "can-i", "get", "leases/my-lease", "-n", "apps"); err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("alice can-i before a binding: %q %v", out, err)
	}
	// docs/security.md's example: a Role for one lease, bound to alice.
	if out := admin.ok("", "create", "role", "lease-holder", "-n", "apps", "--verb=get,update", "--resource=leases.coordination.k8s.io", "--resource-name=my-lease"); strings.TrimSpace(out) != "role.rbac.authorization.k8s.io/lease-holder created" {
		t.Errorf("create role: %q", out)
	}
	admin.ok("", "create", "rolebinding", "lease-holder", "-n", "apps", "--role=lease-holder", "--user=alice")
	admin.ok("", "create", "clusterrole", "lease-reader", "--verb=get,list,watch", "--resource=leases")
	admin.ok("", "create", "clusterrolebinding", "readers", "--clusterrole=lease-reader", "--group=readers", "--serviceaccount=apps:robot")

	waitUntil(t, func() bool {
		out, _, err := alice.run("", "auth", "can-i", "update", "leases/my-lease", "-n", "apps")
		return err == nil && strings.TrimSpace(out) == "yes"
	})
	if out, _, err := alice.run("", "auth", "can-i", "delete", "leases/my-lease", "-n", "apps"); err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("alice can-i delete: %q %v", out, err)
	}
	out := alice.ok("", "auth", "can-i", "--list", "-n", "apps")
	if !regexp.MustCompile(`(?m)^leases\.coordination\.k8s\.io\s+\[\]\s+\[my-lease\]\s+\[get update\]$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+\[/api/\*\]\s+\[\]\s+\[get\]$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^selfsubjectreviews\.authentication\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$`).MatchString(out) {
		t.Errorf("alice can-i --list:\n%s", out)
	}
	// The admin asks for alice: impersonation.
	if out := admin.ok("", "auth", "can-i", "--list", "-n", "apps", "--as=alice"); !strings.Contains(out, "[my-lease]") {
		t.Errorf("can-i --list --as=alice:\n%s", out)
	}
	if out := admin.ok("", "auth", "can-i", "list", "leases", "--all-namespaces", "--as=carol", "--as-group=readers"); strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i as a reader: %q", out)
	}
	errOut := admin.fails("", "get", "leases", "-n", "apps", "--as=alice")
	if want := `Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "apps"`; strings.TrimSpace(errOut) != want {
		t.Errorf("get leases as alice:\n%s", errOut)
	}
	// alice may not act as bob: kubectl's discovery is refused first.
	if errOut := alice.fails("", "get", "leases", "-n", "apps", "--as=bob"); !strings.Contains(errOut, "Error from server (Forbidden)") {
		t.Errorf("alice as bob:\n%s", errOut)
	}

	// Tables: roles have kube-apiserver's default table, bindings their own.
	out = admin.ok("", "get", "roles", "-n", "apps")
	if !regexp.MustCompile(`(?m)^NAME\s+CREATED AT\nlease-holder\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(out) {
		t.Errorf("get roles:\n%s", out)
	}
	out = admin.ok("", "get", "clusterrolebindings", "readers", "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+ROLE\s+AGE\s+USERS\s+GROUPS\s+SERVICEACCOUNTS\nreaders\s+ClusterRole/lease-reader\s+\S+\s+readers\s+apps/robot$`).MatchString(out) {
		t.Errorf("get clusterrolebindings -o wide:\n%s", out)
	}
	out = admin.ok("", "get", "clusterroles", "admin", "edit", "view", "cluster-admin", "-o", "name")
	if strings.Fields(out)[0] != "clusterrole.rbac.authorization.k8s.io/admin" || len(strings.Fields(out)) != 4 {
		t.Errorf("bootstrap cluster roles:\n%s", out)
	}

	// kubectl auth reconcile creates, then finds nothing to do, then adds
	// what a new version of the manifest grants.
	out = admin.ok(reconcileManifest, "auth", "reconcile", "-f", "-")
	if !strings.Contains(out, "role.rbac.authorization.k8s.io/elector reconciled") || !strings.Contains(out, "rolebinding.rbac.authorization.k8s.io/elector reconciled") {
		t.Errorf("first reconcile:\n%s", out)
	}
	out = admin.ok(reconcileManifest, "auth", "reconcile", "-f", "-")
	if !strings.Contains(out, "role.rbac.authorization.k8s.io/elector reconciled") {
		t.Errorf("second reconcile:\n%s", out)
	}
	more := strings.Replace(reconcileManifest, "  verbs: [create]\n", "  verbs: [create]\n- apiGroups: [\"\"]\n  resources: [events]\n  verbs: [create, patch]\n", 1)
	admin.ok(more, "auth", "reconcile", "-f", "-")
	bob := &kubectl{t: t, kubeconfig: userKubeconfig(t, s, "bob", "bob-token")}
	waitUntil(t, func() bool {
		out, _, err := bob.run("", "auth", "can-i", "patch", "events", "-n", "apps")
		return err == nil && strings.TrimSpace(out) == "yes"
	})
	if out := bob.ok("", "auth", "can-i", "create", "leases", "-n", "apps"); strings.TrimSpace(out) != "yes" {
		t.Errorf("bob can-i create leases: %q", out)
	}
}

// waitUntil polls cond until it holds, for at most 20 s: RBAC changes
// reach the authorizer through the cache, a moment after the write.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
