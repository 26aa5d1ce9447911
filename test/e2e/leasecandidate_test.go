package e2e

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestKubectlLeaseCandidates: kubectl creates, lists (across namespaces,
// by spec.leaseName, at either version) and explains LeaseCandidates.
func TestKubectlLeaseCandidates(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	k.ok("", "create", "namespace", "cle")
	// No renewTime: the election controller leaves them alone.
	const candidates = `apiVersion: coordination.k8s.io/v1beta1
kind: LeaseCandidate
metadata:
  name: kcm-node-1
  namespace: kube-system
spec:
  leaseName: kube-controller-manager
  binaryVersion: 1.36.0
  emulationVersion: 1.35.0
  strategy: OldestEmulationVersion
---
apiVersion: coordination.k8s.io/v1alpha2
kind: LeaseCandidate
metadata:
  name: Worker_2
  namespace: cle
spec:
  leaseName: worker
  binaryVersion: 2.1.0
  strategy: example.com/Newest
`
	wantContains(t, "apply", k.ok(candidates, "apply", "-f", "-"),
		"leasecandidate.coordination.k8s.io/kcm-node-1 created", "leasecandidate.coordination.k8s.io/Worker_2 created")

	header := []string{"NAMESPACE", "NAME", "LEASENAME", "BINARYVERSION", "EMULATIONVERSION", "AGE"}
	rows := dropAge(t, table(t, "get leasecandidates -A", k.ok("", "get", "leasecandidates", "-A"), header...), 5)
	want := [][]string{
		{"cle", "Worker_2", "worker", "2.1.0", ""},
		{"kube-system", "kcm-node-1", "kube-controller-manager", "1.36.0", "1.35.0"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("get leasecandidates -A (-want +got):\n%s", diff)
	}
	out := k.ok("", "get", "leasecandidates.v1alpha2.coordination.k8s.io", "-A", "--field-selector", "spec.leaseName=worker", "-o", "name")
	if out != "leasecandidate.coordination.k8s.io/Worker_2\n" {
		t.Errorf("get by spec.leaseName at v1alpha2: %q", out)
	}
	wantContains(t, "immutable leaseName", k.fails("", "-n", "cle", "patch", "leasecandidate", "Worker_2", "--type=merge", "-p", `{"spec":{"leaseName":"other"}}`),
		`spec.leaseName: Invalid value: "other": field is immutable`)

	out = k.ok("", "explain", "leasecandidate.spec")
	wantContains(t, "explain leasecandidate.spec", out, "GROUP:      coordination.k8s.io", "KIND:       LeaseCandidate", "VERSION:    v1beta1", "FIELD: spec <LeaseCandidateSpec>")
	for _, f := range [][2]string{{"binaryVersion", "string"}, {"emulationVersion", "string"}, {"leaseName", "string"},
		{"pingTime", "string"}, {"renewTime", "string"}, {"strategy", "string"}} {
		if re := fmt.Sprintf(`(?m)^  %s\t<%s>`, f[0], f[1]); !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain leasecandidate.spec lacks %s:\n%s", re, out)
		}
	}
	wantContains(t, "explain at v1alpha2", k.ok("", "explain", "leasecandidate.spec.leaseName", "--api-version=coordination.k8s.io/v1alpha2"),
		"VERSION:    v1alpha2", "FIELD: leaseName <string>")
}
