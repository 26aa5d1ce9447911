package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const leaseYAML = `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: my-lease
  labels:
    team: a
spec:
  holderIdentity: alice
  leaseDurationSeconds: 15
  leaseTransitions: 2
  renewTime: "2026-01-01T00:00:00.000000Z"
`

const endpointsYAML = `apiVersion: v1
kind: Endpoints
metadata:
  name: web
subsets:
- addresses:
  - ip: 10.0.0.1
  - ip: 10.0.0.2
  ports:
  - name: http
    port: 80
`

func TestKubectlBasics(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)

	if out := k.ok("", "create", "namespace", "demo"); strings.TrimSpace(out) != "namespace/demo created" {
		t.Errorf("create namespace: %q", out)
	}
	if out := k.ok(leaseYAML, "-n", "demo", "create", "-f", "-"); strings.TrimSpace(out) != "lease.coordination.k8s.io/my-lease created" {
		t.Errorf("create lease: %q", out)
	}
	if out := k.ok(endpointsYAML, "-n", "demo", "create", "-f", "-"); strings.TrimSpace(out) != "endpoints/web created" {
		t.Errorf("create endpoints: %q", out)
	}

	// get prints kube-apiserver's columns.
	out := k.ok("", "-n", "demo", "get", "leases")
	if !regexp.MustCompile(`(?m)^NAME\s+HOLDER\s+AGE\n^my-lease\s+alice\s+\d+s\n$`).MatchString(out) {
		t.Errorf("get leases:\n%s", out)
	}
	out = k.ok("", "-n", "demo", "get", "endpoints")
	if !regexp.MustCompile(`(?m)^NAME\s+ENDPOINTS\s+AGE\n^web\s+10\.0\.0\.1:80,10\.0\.0\.2:80\s+\d+s\n$`).MatchString(out) {
		t.Errorf("get endpoints:\n%s", out)
	}
	out = k.ok("", "get", "leases", "-A")
	if !regexp.MustCompile(`(?m)^NAMESPACE\s+NAME\s+HOLDER\s+AGE\n^demo\s+my-lease\s+alice\s+\d+s\n$`).MatchString(out) {
		t.Errorf("get leases -A:\n%s", out)
	}
	out = k.ok("", "get", "namespaces")
	for _, ns := range []string{"default", "demo", "kube-node-lease", "kube-public", "kube-system"} {
		if !regexp.MustCompile(`(?m)^` + ns + `\s+Active\s+\d+s$`).MatchString(out) {
			t.Errorf("get namespaces lacks %s:\n%s", ns, out)
		}
	}

	// -o yaml and -o json give the stored object.
	var l coordinationv1.Lease
	if err := yaml.Unmarshal([]byte(k.ok("", "-n", "demo", "get", "lease", "my-lease", "-o", "yaml")), &l); err != nil {
		t.Fatal(err)
	}
	if l.Kind != "Lease" || l.APIVersion != "coordination.k8s.io/v1" || *l.Spec.HolderIdentity != "alice" ||
		*l.Spec.LeaseTransitions != 2 || l.Spec.RenewTime.UTC().Year() != 2026 || l.UID == "" || l.Labels["team"] != "a" {
		t.Errorf("get -o yaml: %+v", l)
	}
	var e corev1.Endpoints
	if err := json.Unmarshal([]byte(k.ok("", "-n", "demo", "get", "endpoints", "web", "-o", "json")), &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Subsets) != 1 || len(e.Subsets[0].Addresses) != 2 || e.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("get -o json: %+v", e)
	}
	// The stored object is what kubectl showed.
	stored, err := s.Client(t).CoordinationV1().Leases("demo").Get(t.Context(), "my-lease", metav1.GetOptions{})
	if err != nil || stored.ResourceVersion != l.ResourceVersion {
		t.Errorf("stored %v, %v", stored, err)
	}

	// Errors come back as kube-apiserver words them.
	if errOut := k.fails(leaseYAML, "-n", "demo", "create", "-f", "-"); !strings.Contains(errOut, `leases.coordination.k8s.io "my-lease" already exists`) {
		t.Errorf("duplicate create: %s", errOut)
	}
	if errOut := k.fails("", "-n", "demo", "get", "lease", "nope"); !strings.Contains(errOut, `leases.coordination.k8s.io "nope" not found`) {
		t.Errorf("get missing: %s", errOut)
	}

	if out := k.ok("", "-n", "demo", "delete", "lease", "my-lease"); strings.TrimSpace(out) != `lease.coordination.k8s.io "my-lease" deleted from demo namespace` {
		t.Errorf("delete: %q", out)
	}
	if out, errOut, _ := k.run("", "-n", "demo", "get", "leases"); out != "" || !strings.Contains(errOut, "No resources found in demo namespace.") {
		t.Errorf("get after delete: %q %q", out, errOut)
	}
	if out := k.ok("", "delete", "namespace", "demo"); strings.TrimSpace(out) != `namespace "demo" deleted` {
		t.Errorf("delete namespace: %q", out)
	}
}
