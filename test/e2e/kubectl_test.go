package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// This file drives every kubectl command of issue 4 (apply, apply
// --server-side, edit, patch, label, annotate, describe, explain, get in
// its output formats, get -w, delete, namespaces) against leasehold, and
// checks kubectl's output and the stored objects.

func ptr[T any](v T) *T { return &v }

// with returns a copy of k that adds env to kubectl's environment.
func (k *kubectl) with(env ...string) *kubectl {
	c := *k
	c.env = append(slices.Clone(k.env), env...)
	return &c
}

// file writes content to a new file and returns its path.
func file(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nset -e\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantOutput fails unless got, trimmed, equals the lines of want.
func wantOutput(t *testing.T, what, got string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(strings.Join(want, "\n"), strings.TrimSpace(got)); diff != "" {
		t.Errorf("%s: output (-want +got):\n%s", what, diff)
	}
}

// wantContains fails unless s contains every one of subs.
func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s: output lacks %q:\n%s", what, sub, s)
		}
	}
}

// table splits kubectl's column output into cells, cutting each line at
// the columns' start offsets in the header (kubectl's tabwriter aligns
// them), so empty cells survive. It checks the header names.
func table(t *testing.T, what, out string, header ...string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, header) {
		t.Fatalf("%s: header %q, want %q\n%s", what, got, header, out)
	}
	var starts []int
	at := 0
	for _, h := range header {
		i := strings.Index(lines[0][at:], h)
		starts = append(starts, at+i)
		at += i + len(h)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		var row []string
		for i, s := range starts {
			end := len(l)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(l))
			}
			if s > len(l) {
				row = append(row, "")
				continue
			}
			row = append(row, strings.TrimSpace(l[s:end]))
		}
		rows = append(rows, row)
	}
	return rows
}

var ageRE = regexp.MustCompile(`^\d+s$`)

// dropAge checks the cell at i is a young age and removes it.
func dropAge(t *testing.T, rows [][]string, i int) [][]string {
	t.Helper()
	out := make([][]string, len(rows))
	for r, row := range rows {
		if !ageRE.MatchString(row[i]) {
			t.Errorf("row %q: age %q", row, row[i])
		}
		out[r] = slices.Delete(slices.Clone(row), i, i+1)
	}
	return out
}

type managerOp struct {
	Manager   string
	Operation metav1.ManagedFieldsOperationType
}

// managers lists obj's managedFields managers and operations, sorted.
func managers(obj metav1.Object) []managerOp {
	var out []managerOp
	for _, e := range obj.GetManagedFields() {
		out = append(out, managerOp{e.Manager, e.Operation})
	}
	slices.SortFunc(out, func(a, b managerOp) int { return strings.Compare(a.Manager, b.Manager) })
	return out
}

// ownerOf returns the managers whose fieldsV1 mention field (for example
// "f:holderIdentity").
func ownerOf(obj metav1.Object, field string) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"`+field+`"`) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

func getLease(t *testing.T, c kubernetes.Interface, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease %s/%s: %v", ns, name, err)
	}
	return l
}

func getEndpoints(t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Endpoints {
	t.Helper()
	e, err := c.CoreV1().Endpoints(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get endpoints %s/%s: %v", ns, name, err)
	}
	return e
}

func wantGone(t *testing.T, err error, what string) {
	t.Helper()
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: got %v, want NotFound", what, err)
	}
}

func createLease(t *testing.T, c kubernetes.Interface, ns string, l *coordinationv1.Lease) *coordinationv1.Lease {
	t.Helper()
	out, err := c.CoordinationV1().Leases(ns).Create(t.Context(), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createEndpoints(t *testing.T, c kubernetes.Interface, ns string, e *corev1.Endpoints) *corev1.Endpoints {
	t.Helper()
	out, err := c.CoreV1().Endpoints(ns).Create(t.Context(), e, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKubectlApply(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)

	t.Run("lease", func(t *testing.T) {
		v1 := file(t, "lease.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: applied
  labels:
    team: a
    tier: web
spec:
  holderIdentity: alice
  leaseDurationSeconds: 15
  leaseTransitions: 1
`)
		wantOutput(t, "apply create", k.ok("", "apply", "-f", v1), "lease.coordination.k8s.io/applied created")
		l := getLease(t, c, "default", "applied")
		if *l.Spec.HolderIdentity != "alice" || *l.Spec.LeaseDurationSeconds != 15 || *l.Spec.LeaseTransitions != 1 ||
			!cmp.Equal(l.Labels, map[string]string{"team": "a", "tier": "web"}) {
			t.Errorf("created lease: %+v", l)
		}
		var last map[string]any
		if err := json.Unmarshal([]byte(l.Annotations[corev1.LastAppliedConfigAnnotation]), &last); err != nil {
			t.Fatalf("last-applied annotation: %v: %q", err, l.Annotations)
		}
		if diff := cmp.Diff(map[string]any{"holderIdentity": "alice", "leaseDurationSeconds": 15.0, "leaseTransitions": 1.0}, last["spec"]); diff != "" {
			t.Errorf("last-applied spec (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]managerOp{{"kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate}}, managers(l)); diff != "" {
			t.Errorf("managedFields after apply (-want +got):\n%s", diff)
		}

		wantOutput(t, "apply unchanged", k.ok("", "apply", "-f", v1), "lease.coordination.k8s.io/applied unchanged")
		if again := getLease(t, c, "default", "applied"); again.ResourceVersion != l.ResourceVersion {
			t.Errorf("unchanged apply wrote: rv %s -> %s", l.ResourceVersion, again.ResourceVersion)
		}

		// Someone else annotates the lease; apply leaves what it never
		// applied alone.
		k.ok("", "annotate", "lease", "applied", "owner=ops")
		v2 := file(t, "lease.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: applied
  labels:
    team: a
spec:
  holderIdentity: bob
  leaseDurationSeconds: 15
`)
		wantOutput(t, "apply changed", k.ok("", "apply", "-f", v2), "lease.coordination.k8s.io/applied configured")
		l = getLease(t, c, "default", "applied")
		if *l.Spec.HolderIdentity != "bob" || l.Spec.LeaseTransitions != nil || !cmp.Equal(l.Labels, map[string]string{"team": "a"}) || l.Annotations["owner"] != "ops" {
			t.Errorf("configured lease: spec %+v labels %v annotations %v", l.Spec, l.Labels, l.Annotations)
		}
		last = nil
		if err := json.Unmarshal([]byte(l.Annotations[corev1.LastAppliedConfigAnnotation]), &last); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"holderIdentity": "bob", "leaseDurationSeconds": 15.0}, last["spec"]); diff != "" {
			t.Errorf("last-applied spec after reconfiguring (-want +got):\n%s", diff)
		}

		// Server-side dry run shows the change and stores nothing.
		v3 := file(t, "lease.yaml", strings.Replace(readFile(t, v2), "holderIdentity: bob", "holderIdentity: carol", 1))
		wantOutput(t, "apply dry-run", k.ok("", "apply", "-f", v3, "--dry-run=server"), "lease.coordination.k8s.io/applied configured (server dry run)")
		if got := k.ok("", "apply", "-f", v3, "--dry-run=server", "-o", "jsonpath={.spec.holderIdentity}"); got != "carol" {
			t.Errorf("dry-run apply -o jsonpath: %q", got)
		}
		if dry := getLease(t, c, "default", "applied"); dry.ResourceVersion != l.ResourceVersion || *dry.Spec.HolderIdentity != "bob" {
			t.Errorf("dry-run apply stored: %+v", dry)
		}

		// kubectl validates strictly on the server: an unknown field fails.
		errOut := k.fails(`apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: typo
spec:
  holderIdentiy: x
`, "apply", "-f", "-")
		wantContains(t, "apply with an unknown field", errOut,
			`Error from server (BadRequest): error when creating "STDIN": Lease in version "v1" cannot be handled as a Lease: strict decoding error: unknown field "spec.holderIdentiy"`)
		errOut = k.fails(strings.Replace(readFile(t, v2), "leaseDurationSeconds: 15", "leaseDurationSeconds: 15\n  holderIdentiy: x", 1), "apply", "-f", "-")
		wantContains(t, "apply of a change with an unknown field", errOut, `strict decoding error: unknown field "spec.holderIdentiy"`)
		errOut = k.fails(strings.Replace(readFile(t, v2), "leaseDurationSeconds: 15", "leaseDurationSeconds: 0", 1), "apply", "-f", "-")
		wantContains(t, "apply of an invalid change", errOut,
			`The Lease "applied" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`)
	})

	t.Run("endpoints", func(t *testing.T) {
		v1 := file(t, "ep.yaml", `apiVersion: v1
kind: Endpoints
metadata:
  name: web
  labels:
    app: web
    stage: beta
subsets:
- addresses:
  - ip: 10.0.0.1
  - ip: 10.0.0.2
  ports:
  - name: http
    port: 80
    protocol: TCP
`)
		wantOutput(t, "apply create", k.ok("", "apply", "-f", v1), "endpoints/web created")
		wantOutput(t, "apply unchanged", k.ok("", "apply", "-f", v1), "endpoints/web unchanged")
		// Without protocol in the file, the live object differs from it by
		// the server's default (TCP); subsets has no merge key, so
		// kubectl's three-way patch replaces it and reports "configured",
		// as against kube-apiserver. The server finds nothing to change.
		noProto := file(t, "ep.yaml", strings.Replace(readFile(t, v1), "    protocol: TCP\n", "", 1))
		wantOutput(t, "apply without the defaulted protocol", k.ok("", "apply", "-f", noProto), "endpoints/web configured")
		before := getEndpoints(t, c, "default", "web")
		wantOutput(t, "apply without the defaulted protocol again", k.ok("", "apply", "-f", noProto), "endpoints/web configured")
		if after := getEndpoints(t, c, "default", "web"); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("a patch that changes nothing wrote: rv %s -> %s", before.ResourceVersion, after.ResourceVersion)
		}
		v2 := file(t, "ep.yaml", `apiVersion: v1
kind: Endpoints
metadata:
  name: web
  labels:
    app: web
subsets:
- addresses:
  - ip: 10.0.0.3
  ports:
  - name: https
    port: 443
`)
		wantOutput(t, "apply changed", k.ok("", "apply", "-f", v2), "endpoints/web configured")
		e := getEndpoints(t, c, "default", "web")
		want := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}
		if diff := cmp.Diff(want, e.Subsets); diff != "" {
			t.Errorf("subsets after apply (-want +got):\n%s", diff)
		}
		if !cmp.Equal(e.Labels, map[string]string{"app": "web"}) || !strings.Contains(e.Annotations[corev1.LastAppliedConfigAnnotation], `"ip":"10.0.0.3"`) {
			t.Errorf("endpoints metadata after apply: %v %v", e.Labels, e.Annotations)
		}
	})

	t.Run("several objects", func(t *testing.T) {
		both := file(t, "both.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: pair
spec:
  holderIdentity: one
---
apiVersion: v1
kind: Endpoints
metadata:
  name: pair
subsets:
- addresses:
  - ip: 10.1.0.1
`)
		wantOutput(t, "apply of two objects", k.ok("", "apply", "-f", both), "lease.coordination.k8s.io/pair created", "endpoints/pair created")
		getLease(t, c, "default", "pair")
		getEndpoints(t, c, "default", "pair")
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKubectlServerSideApply(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)

	t.Run("lease", func(t *testing.T) {
		a := file(t, "a.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: ssa
spec:
  holderIdentity: alice
  leaseDurationSeconds: 10
`)
		b := file(t, "b.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: ssa
spec:
  holderIdentity: bob
`)
		// Apply creates the missing object.
		wantOutput(t, "apply create", k.ok("", "apply", "--server-side", "--field-manager=mgr-a", "-f", a), "lease.coordination.k8s.io/ssa serverside-applied")
		l := getLease(t, c, "default", "ssa")
		if diff := cmp.Diff([]managerOp{{"mgr-a", metav1.ManagedFieldsOperationApply}}, managers(l)); diff != "" {
			t.Errorf("managedFields (-want +got):\n%s", diff)
		}
		if _, ok := l.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
			t.Errorf("server-side apply left a last-applied annotation: %v", l.Annotations)
		}

		// A second manager conflicts.
		_, errOut, err := k.run("", "apply", "--server-side", "--field-manager=mgr-b", "-f", b)
		if err == nil {
			t.Fatal("conflicting apply succeeded")
		}
		wantContains(t, "conflicting apply", errOut,
			`error: Apply failed with 1 conflict: conflict with "mgr-a": .spec.holderIdentity`,
			"--force-conflicts")
		if got := getLease(t, c, "default", "ssa"); got.ResourceVersion != l.ResourceVersion {
			t.Errorf("a conflicting apply changed the lease")
		}

		// --force-conflicts takes ownership.
		wantOutput(t, "forced apply", k.ok("", "apply", "--server-side", "--field-manager=mgr-b", "--force-conflicts", "-f", b), "lease.coordination.k8s.io/ssa serverside-applied")
		l = getLease(t, c, "default", "ssa")
		if *l.Spec.HolderIdentity != "bob" || *l.Spec.LeaseDurationSeconds != 10 {
			t.Errorf("spec after forced apply: %+v", l.Spec)
		}
		if diff := cmp.Diff([]managerOp{{"mgr-a", metav1.ManagedFieldsOperationApply}, {"mgr-b", metav1.ManagedFieldsOperationApply}}, managers(l)); diff != "" {
			t.Errorf("managedFields after force (-want +got):\n%s", diff)
		}
		if got := ownerOf(l, "f:holderIdentity"); !slices.Equal(got, []string{"mgr-b"}) {
			t.Errorf("holderIdentity owned by %v, want mgr-b", got)
		}
		if got := ownerOf(l, "f:leaseDurationSeconds"); !slices.Equal(got, []string{"mgr-a"}) {
			t.Errorf("leaseDurationSeconds owned by %v, want mgr-a", got)
		}

		// Server-side dry run answers the would-be object, stores nothing.
		c3 := file(t, "c.yaml", strings.Replace(readFile(t, a), "alice", "carol", 1))
		wantOutput(t, "dry-run apply", k.ok("", "apply", "--server-side", "--field-manager=mgr-a", "--force-conflicts", "--dry-run=server", "-f", c3),
			"lease.coordination.k8s.io/ssa serverside-applied (server dry run)")
		if got := k.ok("", "apply", "--server-side", "--field-manager=mgr-a", "--force-conflicts", "--dry-run=server", "-f", c3, "-o", "jsonpath={.spec.holderIdentity}"); got != "carol" {
			t.Errorf("dry-run apply -o jsonpath: %q", got)
		}
		if got := getLease(t, c, "default", "ssa"); got.ResourceVersion != l.ResourceVersion || *got.Spec.HolderIdentity != "bob" {
			t.Errorf("dry-run apply stored: %+v", got)
		}

		// A dry-run apply of a missing object creates nothing.
		ghost := file(t, "ghost.yaml", strings.Replace(readFile(t, a), "name: ssa", "name: ghost", 1))
		wantOutput(t, "dry-run apply creating", k.ok("", "apply", "--server-side", "--field-manager=mgr-a", "--dry-run=server", "-f", ghost),
			"lease.coordination.k8s.io/ghost serverside-applied (server dry run)")
		_, err = c.CoordinationV1().Leases("default").Get(t.Context(), "ghost", metav1.GetOptions{})
		wantGone(t, err, "dry-run apply of a missing lease")

		// A kubectl patch (an Update) takes the field; the applier now
		// conflicts with it, named with its apiVersion.
		k.ok("", "patch", "lease", "ssa", "-p", `{"spec":{"holderIdentity":"patched"}}`)
		_, errOut, err = k.run("", "apply", "--server-side", "--field-manager=mgr-b", "-f", b)
		if err == nil {
			t.Fatal("apply over a patched field succeeded")
		}
		wantContains(t, "conflict with an updater", errOut,
			`error: Apply failed with 1 conflict: conflict with "kubectl-patch" using coordination.k8s.io/v1: .spec.holderIdentity`)
	})

	t.Run("endpoints", func(t *testing.T) {
		a := file(t, "a.yaml", `apiVersion: v1
kind: Endpoints
metadata:
  name: ssa
subsets:
- addresses:
  - ip: 10.0.0.1
  ports:
  - port: 80
`)
		b := file(t, "b.yaml", strings.Replace(readFile(t, a), "10.0.0.1", "10.0.0.2", 1))
		wantOutput(t, "apply create", k.ok("", "apply", "--server-side", "--field-manager=mgr-a", "-f", a), "endpoints/ssa serverside-applied")
		errOut := k.fails("", "apply", "--server-side", "--field-manager=mgr-b", "-f", b)
		wantContains(t, "conflicting apply", errOut, `Apply failed with 1 conflict: conflict with "mgr-a": .subsets`)
		wantOutput(t, "forced apply", k.ok("", "apply", "--server-side", "--field-manager=mgr-b", "--force-conflicts", "-f", b), "endpoints/ssa serverside-applied")
		e := getEndpoints(t, c, "default", "ssa")
		if len(e.Subsets) != 1 || e.Subsets[0].Addresses[0].IP != "10.0.0.2" || e.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("subsets after forced apply: %+v", e.Subsets)
		}
		// subsets is atomic: mgr-a lost everything it had.
		if diff := cmp.Diff([]managerOp{{"mgr-b", metav1.ManagedFieldsOperationApply}}, managers(e)); diff != "" {
			t.Errorf("managedFields (-want +got):\n%s", diff)
		}
	})

	t.Run("client-side apply upgraded to server-side", func(t *testing.T) {
		v1 := file(t, "up.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: upgrade
spec:
  holderIdentity: alice
  leaseDurationSeconds: 10
`)
		k.ok("", "apply", "-f", v1)
		v2 := file(t, "up.yaml", strings.Replace(readFile(t, v1), "alice", "bob", 1))
		// kubectl migrates the client-side-apply manager with a JSON patch
		// of managedFields, then applies as manager "kubectl": no
		// conflict.
		wantOutput(t, "server-side apply over client-side apply", k.ok("", "apply", "--server-side", "-f", v2), "lease.coordination.k8s.io/upgrade serverside-applied")
		l := getLease(t, c, "default", "upgrade")
		if *l.Spec.HolderIdentity != "bob" {
			t.Errorf("spec: %+v", l.Spec)
		}
		if got := ownerOf(l, "f:holderIdentity"); !slices.Equal(got, []string{"kubectl"}) {
			t.Errorf("holderIdentity owned by %v, want kubectl: %+v", got, l.ManagedFields)
		}
		for _, m := range managers(l) {
			if m.Manager == "kubectl-client-side-apply" {
				t.Errorf("client-side apply manager survived the upgrade: %+v", l.ManagedFields)
			}
		}
		// The server keeps the last-applied annotation in step with what
		// manager "kubectl" applies (managedfields' last-applied updater).
		if la := l.Annotations[corev1.LastAppliedConfigAnnotation]; !strings.Contains(la, `"holderIdentity":"bob"`) {
			t.Errorf("last-applied annotation not updated: %q", la)
		}
	})
}

func TestKubectlEdit(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := s.Client(t)
	k := newKubectl(t, s).with("TMPDIR=" + t.TempDir())
	editor := func(body string) *kubectl { return k.with("KUBE_EDITOR=", "EDITOR="+script(t, body)) }

	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "ed"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](15)}})
	createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ed"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}}})

	t.Run("lease", func(t *testing.T) {
		out := editor(`sed -i -e 's/holderIdentity: alice/holderIdentity: edited/' "$1"`).ok("", "edit", "lease", "ed")
		wantOutput(t, "edit", out, "lease.coordination.k8s.io/ed edited")
		l := getLease(t, c, "default", "ed")
		if *l.Spec.HolderIdentity != "edited" || *l.Spec.LeaseDurationSeconds != 15 {
			t.Errorf("edited spec: %+v", l.Spec)
		}
		if got := ownerOf(l, "f:holderIdentity"); !slices.Equal(got, []string{"kubectl-edit"}) {
			t.Errorf("holderIdentity owned by %v, want kubectl-edit", got)
		}
	})

	t.Run("endpoints", func(t *testing.T) {
		out := editor(`sed -i -e 's/port: 80/port: 8080/' -e 's/ip: 10.0.0.1/ip: 10.0.0.7/' "$1"`).ok("", "edit", "endpoints", "ed")
		wantOutput(t, "edit", out, "endpoints/ed edited")
		want := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.7"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}
		if diff := cmp.Diff(want, getEndpoints(t, c, "default", "ed").Subsets); diff != "" {
			t.Errorf("edited subsets (-want +got):\n%s", diff)
		}
	})

	t.Run("no change", func(t *testing.T) {
		before := getLease(t, c, "default", "ed")
		out, errOut, err := editor(`true`).run("", "edit", "lease", "ed")
		if err != nil || strings.TrimSpace(out) != "" || !strings.Contains(errOut, "Edit cancelled, no changes made.") {
			t.Errorf("edit without changes: %v %q %q", err, out, errOut)
		}
		if after := getLease(t, c, "default", "ed"); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("edit without changes wrote")
		}
	})

	t.Run("invalid change", func(t *testing.T) {
		before := getLease(t, c, "default", "ed")
		// kubectl reopens the editor with the server's causes as comments;
		// the second edit changes nothing, so kubectl gives up.
		errOut := editor(`sed -i -e 's/leaseDurationSeconds: 15/leaseDurationSeconds: -1/' "$1"`).fails("", "edit", "lease", "ed")
		wantContains(t, "invalid edit", errOut, `error: leases.coordination.k8s.io "ed" is invalid`, "Edit cancelled, no valid changes were saved.")
		m := regexp.MustCompile(`A copy of your changes has been stored to "([^"]+)"`).FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("no saved copy in:\n%s", errOut)
		}
		wantContains(t, "saved copy", readFile(t, m[1]),
			`# leases.coordination.k8s.io "ed" was not valid:`,
			`# * spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0`)
		if after := getLease(t, c, "default", "ed"); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("invalid edit wrote")
		}
	})
}

func TestKubectlPatch(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](15)}})
	createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "1"}},
		Subsets: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}},
			{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}, Ports: []corev1.EndpointPort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
		}})

	leaseSteps := []struct {
		name string
		args []string
		out  string
		want coordinationv1.LeaseSpec
		// noop: the stored object must keep its resourceVersion.
		noop bool
	}{
		{"strategic (the default)", []string{"-p", `{"spec":{"holderIdentity":"bob"}}`}, "lease.coordination.k8s.io/p patched",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](15)}, false},
		{"merge deleting a field", []string{"--type=merge", "-p", `{"spec":{"leaseDurationSeconds":null,"leaseTransitions":3}}`}, "lease.coordination.k8s.io/p patched",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseTransitions: ptr[int32](3)}, false},
		{"json", []string{"--type=json", "-p", `[{"op":"test","path":"/spec/holderIdentity","value":"bob"},{"op":"replace","path":"/spec/holderIdentity","value":"carol"},{"op":"remove","path":"/spec/leaseTransitions"}]`},
			"lease.coordination.k8s.io/p patched", coordinationv1.LeaseSpec{HolderIdentity: ptr("carol")}, false},
		{"json from a file", []string{"--type=json", "--patch-file", file(t, "patch.json", `[{"op":"add","path":"/spec/leaseDurationSeconds","value":30}]`)},
			"lease.coordination.k8s.io/p patched", coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](30)}, false},
		{"no change", []string{"-p", `{"spec":{"holderIdentity":"carol"}}`}, "lease.coordination.k8s.io/p patched (no change)",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](30)}, true},
		{"merge no change", []string{"--type=merge", "-p", `{"spec":{"leaseDurationSeconds":30}}`}, "lease.coordination.k8s.io/p patched (no change)",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](30)}, true},
		{"json no change", []string{"--type=json", "-p", `[{"op":"test","path":"/spec/holderIdentity","value":"carol"}]`}, "lease.coordination.k8s.io/p patched (no change)",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](30)}, true},
		// kubectl patch prints no "(server dry run)" suffix.
		{"server dry run", []string{"-p", `{"spec":{"holderIdentity":"dry"}}`, "--dry-run=server"}, "lease.coordination.k8s.io/p patched",
			coordinationv1.LeaseSpec{HolderIdentity: ptr("carol"), LeaseDurationSeconds: ptr[int32](30)}, true},
	}
	for _, st := range leaseSteps {
		before := getLease(t, c, "default", "p")
		wantOutput(t, st.name, k.ok("", append([]string{"patch", "lease", "p"}, st.args...)...), st.out)
		after := getLease(t, c, "default", "p")
		if diff := cmp.Diff(st.want, after.Spec); diff != "" {
			t.Errorf("%s: stored spec (-want +got):\n%s", st.name, diff)
		}
		if st.noop != (after.ResourceVersion == before.ResourceVersion) {
			t.Errorf("%s: resourceVersion %s -> %s", st.name, before.ResourceVersion, after.ResourceVersion)
		}
	}
	if got := ownerOf(getLease(t, c, "default", "p"), "f:holderIdentity"); !slices.Equal(got, []string{"kubectl-patch"}) {
		t.Errorf("holderIdentity owned by %v, want kubectl-patch", got)
	}

	before := getLease(t, c, "default", "p")
	failures := []struct {
		name   string
		args   []string
		stderr string
	}{
		// kube-apiserver answers a failed JSON patch test with a bare 422
		// (NewGenericServerResponse): the detail is not sent.
		{"failing json test", []string{"lease", "p", "--type=json", "-p", `[{"op":"test","path":"/spec/holderIdentity","value":"nobody"}]`},
			"The request is invalid: the server rejected our request due to an error in our request"},
		{"invalid result", []string{"lease", "p", "--type=merge", "-p", `{"spec":{"leaseTransitions":-1}}`},
			`The Lease "p" is invalid: spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`},
		{"missing object", []string{"lease", "nope", "-p", `{"spec":{"holderIdentity":"x"}}`},
			`Error from server (NotFound): leases.coordination.k8s.io "nope" not found`},
		{"missing endpoints", []string{"endpoints", "nope", "--type=merge", "-p", `{"subsets":[]}`},
			`Error from server (NotFound): endpoints "nope" not found`},
	}
	for _, f := range failures {
		wantContains(t, f.name, k.fails("", append([]string{"patch"}, f.args...)...), f.stderr)
	}
	// kubectl patch sends no fieldValidation: the server's default, Warn,
	// reports the unknown field and drops it.
	out, errOut, err := k.run("", "patch", "lease", "p", "-p", `{"spec":{"holder":"x"}}`)
	if err != nil || strings.TrimSpace(out) != "lease.coordination.k8s.io/p patched (no change)" || !strings.Contains(errOut, `Warning: unknown field "spec.holder"`) {
		t.Errorf("patch with an unknown field: %v\n%s\n%s", err, out, errOut)
	}
	if after := getLease(t, c, "default", "p"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("failed patches changed the lease")
	}

	// Endpoints: no merge keys, so lists are replaced whole.
	epSteps := []struct {
		name string
		args []string
		want []corev1.EndpointSubset
	}{
		{"strategic replaces subsets", []string{"-p", `{"subsets":[{"addresses":[{"ip":"10.0.0.9"}],"ports":[{"port":9}]}]}`},
			[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Port: 9, Protocol: corev1.ProtocolTCP}}}}},
		{"json appends an address", []string{"--type=json", "-p", `[{"op":"add","path":"/subsets/0/addresses/-","value":{"ip":"10.0.0.8","hostname":"h"}}]`},
			[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}, {IP: "10.0.0.8", Hostname: "h"}}, Ports: []corev1.EndpointPort{{Port: 9, Protocol: corev1.ProtocolTCP}}}}},
		{"merge replaces ports", []string{"--type=merge", "-p", `{"subsets":[{"addresses":[{"ip":"10.0.0.9"}],"ports":[{"name":"a","port":1},{"name":"b","port":2}]}]}`},
			[]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Name: "a", Port: 1, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 2, Protocol: corev1.ProtocolTCP}}}}},
	}
	for _, st := range epSteps {
		wantOutput(t, st.name, k.ok("", append([]string{"patch", "endpoints", "p"}, st.args...)...), "endpoints/p patched")
		if diff := cmp.Diff(st.want, getEndpoints(t, c, "default", "p").Subsets); diff != "" {
			t.Errorf("%s: stored subsets (-want +got):\n%s", st.name, diff)
		}
	}
	wantContains(t, "invalid endpoints patch", k.fails("", "patch", "endpoints", "p", "--type=json", "-p", `[{"op":"replace","path":"/subsets/0/ports/0/port","value":0}]`),
		`The Endpoints "p" is invalid: subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`)
}

func TestKubectlLabelAnnotate(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	// The lease is created with a field to own: kube-apiserver never
	// starts tracking managedFields on an object that has none
	// (managedfields' skipNonAppliedManager), see TestManagedFieldsUntracked.
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "la"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h")}})
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lb", Labels: map[string]string{"group": "g"}}})
	createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ea"}})

	type meta struct{ Labels, Annotations map[string]string }
	stored := func(kind, name string) meta {
		if kind == "endpoints" {
			e := getEndpoints(t, c, "default", name)
			return meta{e.Labels, e.Annotations}
		}
		l := getLease(t, c, "default", name)
		return meta{l.Labels, l.Annotations}
	}
	for _, tc := range []struct{ kind, name, ref string }{
		{"lease", "la", "lease.coordination.k8s.io/la"},
		{"endpoints", "ea", "endpoints/ea"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			wantOutput(t, "label", k.ok("", "label", tc.kind, tc.name, "x=1"), tc.ref+" labeled")
			wantContains(t, "label without --overwrite", k.fails("", "label", tc.kind, tc.name, "x=2"), `error: 'x' already has a value (1), and --overwrite is false`)
			if got := stored(tc.kind, tc.name).Labels; !cmp.Equal(got, map[string]string{"x": "1"}) {
				t.Errorf("labels after refused overwrite: %v", got)
			}
			wantOutput(t, "label --overwrite", k.ok("", "label", tc.kind, tc.name, "x=2", "--overwrite"), tc.ref+" labeled")
			if got := stored(tc.kind, tc.name).Labels; !cmp.Equal(got, map[string]string{"x": "2"}) {
				t.Errorf("labels after overwrite: %v", got)
			}
			wantOutput(t, "label removal", k.ok("", "label", tc.kind, tc.name, "x-"), tc.ref+" unlabeled")
			if got := stored(tc.kind, tc.name).Labels; len(got) != 0 {
				t.Errorf("labels after removal: %v", got)
			}

			wantOutput(t, "annotate", k.ok("", "annotate", tc.kind, tc.name, "note=hi", "other=o"), tc.ref+" annotated")
			wantContains(t, "annotate without --overwrite", k.fails("", "annotate", tc.kind, tc.name, "note=ho"),
				`error: --overwrite is false but found the following declared annotation(s): 'note' already has a value (hi)`)
			wantOutput(t, "annotate --overwrite", k.ok("", "annotate", tc.kind, tc.name, "note=ho", "--overwrite"), tc.ref+" annotated")
			if got := stored(tc.kind, tc.name).Annotations; !cmp.Equal(got, map[string]string{"note": "ho", "other": "o"}) {
				t.Errorf("annotations after overwrite: %v", got)
			}
			wantOutput(t, "annotation removal", k.ok("", "annotate", tc.kind, tc.name, "note-"), tc.ref+" annotated")
			if got := stored(tc.kind, tc.name).Annotations; !cmp.Equal(got, map[string]string{"other": "o"}) {
				t.Errorf("annotations after removal: %v", got)
			}
		})
	}

	// The label and annotate managers own what they wrote.
	k.ok("", "label", "lease", "la", "owned=yes")
	l := getLease(t, c, "default", "la")
	if got := ownerOf(l, "f:owned"); !slices.Equal(got, []string{"kubectl-label"}) {
		t.Errorf("label owned by %v", got)
	}
	if got := ownerOf(l, "f:other"); !slices.Equal(got, []string{"kubectl-annotate"}) {
		t.Errorf("annotation owned by %v", got)
	}

	// Selectors and --all.
	wantOutput(t, "label -l", k.ok("", "label", "leases", "-l", "group=g", "picked=yes"), "lease.coordination.k8s.io/lb labeled")
	wantOutput(t, "label --all", k.ok("", "label", "leases", "--all", "all=yes"), "lease.coordination.k8s.io/la labeled", "lease.coordination.k8s.io/lb labeled")
	if got := getLease(t, c, "default", "lb").Labels; !cmp.Equal(got, map[string]string{"group": "g", "picked": "yes", "all": "yes"}) {
		t.Errorf("labels of lb: %v", got)
	}
	// --resource-version makes the patch conditional.
	wantContains(t, "label with a stale resourceVersion", k.fails("", "label", "lease", "la", "late=1", "--resource-version=1"),
		`Error from server (Conflict): Operation cannot be fulfilled on leases.coordination.k8s.io "la": the object has been modified; please apply your changes to the latest version and try again`)
}

func TestKubectlDescribe(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	renew := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	l := createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](15), LeaseTransitions: ptr[int32](2), RenewTime: &renew}})
	createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"app": "web"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}}})

	out := k.ok("", "describe", "lease", "d")
	for _, re := range []string{
		`(?m)^Name:\s+d$`, `(?m)^Namespace:\s+default$`, `(?m)^Labels:\s+team=a$`, `(?m)^Annotations:\s+note: x$`,
		`(?m)^API Version:\s+coordination\.k8s\.io/v1$`, `(?m)^Kind:\s+Lease$`,
		`(?m)^  Resource Version:\s+` + l.ResourceVersion + `$`, `(?m)^  UID:\s+` + string(l.UID) + `$`,
		`(?m)^Spec:$`, `(?m)^  Holder Identity:\s+alice$`, `(?m)^  Lease Duration Seconds:\s+15$`, `(?m)^  Lease Transitions:\s+2$`,
		`(?m)^  Renew Time:\s+2026-01-02T03:04:05\.123456Z$`, `(?m)^Events:\s+<none>$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe lease lacks %s:\n%s", re, out)
		}
	}
	out = k.ok("", "describe", "endpoints", "d")
	for _, re := range []string{
		`(?m)^Name:\s+d$`, `(?m)^Namespace:\s+default$`, `(?m)^Labels:\s+app=web$`, `(?m)^Annotations:\s+<none>$`,
		`(?m)^Subsets:$`, `(?m)^  Addresses:\s+10\.0\.0\.1,10\.0\.0\.2$`, `(?m)^  NotReadyAddresses:\s+10\.0\.0\.3$`,
		`(?m)^    Name\s+Port\s+Protocol$`, `(?m)^    http\s+80\s+TCP$`, `(?m)^Events:\s+<none>$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe endpoints lacks %s:\n%s", re, out)
		}
	}
	// describe by selector, and of a namespace.
	if out := k.ok("", "describe", "leases", "-l", "team=a"); !regexp.MustCompile(`(?m)^  Holder Identity:\s+alice$`).MatchString(out) {
		t.Errorf("describe leases -l:\n%s", out)
	}
	out = k.ok("", "describe", "namespace", "default")
	for _, re := range []string{`(?m)^Name:\s+default$`, `(?m)^Labels:\s+kubernetes\.io/metadata\.name=default$`, `(?m)^Status:\s+Active$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe namespace lacks %s:\n%s", re, out)
		}
	}
	wantContains(t, "describe missing", k.fails("", "describe", "lease", "nope"), `Error from server (NotFound): leases.coordination.k8s.io "nope" not found`)
}

// normalize collapses whitespace, so texts wrapped differently compare.
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)

	// kubectl explain reads /openapi/v3 by default and /openapi/v2 with
	// --output=plaintext-openapiv2; the two templates differ.
	for _, tc := range []struct {
		format                               string
		header, holderField, subsetsField    []string
		fieldRE                              string
		subsetFields, specFields, portFields []string
	}{
		{
			format:       "plaintext",
			header:       []string{"GROUP:      coordination.k8s.io", "KIND:       Lease", "VERSION:    v1"},
			holderField:  []string{"FIELD: holderIdentity <string>"},
			subsetsField: []string{"KIND:       Endpoints", "VERSION:    v1", "FIELD: subsets <[]EndpointSubset>"},
			fieldRE:      `(?m)^  %s\t<%s>$`,
			subsetFields: []string{"addresses", `\[\]EndpointAddress`, "notReadyAddresses", `\[\]EndpointAddress`, "ports", `\[\]EndpointPort`},
			portFields:   []string{"FIELD: port <integer>"},
		},
		{
			format:       "plaintext-openapiv2",
			header:       []string{"KIND:     Lease", "VERSION:  coordination.k8s.io/v1"},
			holderField:  []string{"FIELD:    holderIdentity <string>"},
			subsetsField: []string{"KIND:     Endpoints", "VERSION:  v1", "RESOURCE: subsets <[]Object>"},
			fieldRE:      `(?m)^   %s\t<%s>$`,
			subsetFields: []string{"addresses", `\[\]Object`, "notReadyAddresses", `\[\]Object`, "ports", `\[\]Object`},
			portFields:   []string{"FIELD:    port <integer>"},
		},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out := k.ok("", "explain", "lease.spec.holderIdentity", "--output="+tc.format)
			wantContains(t, "explain lease.spec.holderIdentity", out, append(tc.header, tc.holderField...)...)
			// The description is k8s.io/api's doc text.
			wantContains(t, "explain lease.spec.holderIdentity description", normalize(out), normalize(coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]))

			out = k.ok("", "explain", "endpoints.subsets", "--output="+tc.format)
			wantContains(t, "explain endpoints.subsets", out, tc.subsetsField...)
			wantContains(t, "explain endpoints.subsets description", normalize(out),
				normalize(corev1.Endpoints{}.SwaggerDoc()["subsets"]), normalize(corev1.EndpointSubset{}.SwaggerDoc()[""]),
				normalize(corev1.EndpointSubset{}.SwaggerDoc()["notReadyAddresses"]))
			for i := 0; i < len(tc.subsetFields); i += 2 {
				if re := fmt.Sprintf(tc.fieldRE, tc.subsetFields[i], tc.subsetFields[i+1]); !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("explain endpoints.subsets lacks %s:\n%s", re, out)
				}
			}

			out = k.ok("", "explain", "lease.spec", "--output="+tc.format)
			for _, f := range [][2]string{{"acquireTime", "string"}, {"holderIdentity", "string"}, {"leaseDurationSeconds", "integer"},
				{"leaseTransitions", "integer"}, {"preferredHolder", "string"}, {"renewTime", "string"}, {"strategy", "string"}} {
				if re := fmt.Sprintf(tc.fieldRE, f[0], f[1]); !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("explain lease.spec lacks %s:\n%s", re, out)
				}
			}
			out = k.ok("", "explain", "endpoints.subsets.ports.port", "--output="+tc.format)
			wantContains(t, "explain endpoints.subsets.ports.port", out, tc.portFields...)
			wantContains(t, "explain endpoints.subsets.ports.port description", normalize(out), normalize(corev1.EndpointPort{}.SwaggerDoc()["port"]))
		})
	}
	out := k.ok("", "explain", "leases", "--recursive")
	for _, f := range []string{"holderIdentity", "leaseDurationSeconds", "managedFields", "resourceVersion"} {
		if !strings.Contains(out, f) {
			t.Errorf("explain leases --recursive lacks %s", f)
		}
	}
	k.ok("", "explain", "leases", "--api-version=coordination.k8s.io/v1")
	wantContains(t, "explain of an unknown field", k.fails("", "explain", "lease.spec.nope"), `field "nope" does not exist`)
}

func TestKubectlGetOutputs(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	now := time.Now()
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "held", Labels: map[string]string{"team": "a"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("alice"), LeaseDurationSeconds: ptr[int32](3600), LeaseTransitions: ptr[int32](0), RenewTime: &metav1.MicroTime{Time: now}}})
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "expired", Labels: map[string]string{"team": "b"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("bob"), LeaseDurationSeconds: ptr[int32](15), LeaseTransitions: ptr[int32](7), RenewTime: &metav1.MicroTime{Time: now.Add(-30 * 24 * time.Hour)}}})
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "released", Labels: map[string]string{"team": "a"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseTransitions: ptr[int32](3), RenewTime: &metav1.MicroTime{Time: now.Add(-12 * time.Hour)}}})

	t.Run("wide", func(t *testing.T) {
		rows := table(t, "get leases -o wide", k.ok("", "get", "leases", "-o", "wide"), "NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS", "EXPIRED")
		rows = dropAge(t, rows, 2)
		// held was renewed moments ago; its RENEWED cell is a few seconds.
		for _, r := range rows {
			if r[0] == "held" && ageRE.MatchString(r[3]) {
				r[3] = "<recent>"
			}
		}
		want := [][]string{
			{"bare", "", "<none>", "<none>", "<none>", "false"},
			{"expired", "bob", "15s", "30d", "7", "true"},
			{"held", "alice", "3600s", "<recent>", "0", "false"},
			{"released", "", "<none>", "12h", "3", "false"},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("get leases -o wide, AGE dropped (-want +got):\n%s", diff)
		}
		// Without -o wide only kube-apiserver's columns show.
		rows = dropAge(t, table(t, "get leases", k.ok("", "get", "leases"), "NAME", "HOLDER", "AGE"), 2)
		if diff := cmp.Diff([][]string{{"bare", ""}, {"expired", "bob"}, {"held", "alice"}, {"released", ""}}, rows); diff != "" {
			t.Errorf("get leases (-want +got):\n%s", diff)
		}
		rows = table(t, "get lease expired -o wide", k.ok("", "get", "lease", "expired", "-o", "wide"), "NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS", "EXPIRED")
		if len(rows) != 1 || rows[0][0] != "expired" || rows[0][6] != "true" {
			t.Errorf("get lease expired -o wide: %q", rows)
		}
		table(t, "get leases -A -o wide", k.ok("", "get", "leases", "-A", "-o", "wide"), "NAMESPACE", "NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS", "EXPIRED")
		if out := k.ok("", "get", "leases", "--no-headers"); strings.Contains(out, "NAME") || len(strings.Split(strings.TrimSpace(out), "\n")) != 4 {
			t.Errorf("get leases --no-headers:\n%s", out)
		}
	})

	t.Run("yaml and json", func(t *testing.T) {
		stored := getLease(t, c, "default", "held")
		var fromYAML coordinationv1.Lease
		if err := yaml.UnmarshalStrict([]byte(k.ok("", "get", "lease", "held", "-o", "yaml")), &fromYAML); err != nil {
			t.Fatal(err)
		}
		if fromYAML.Kind != "Lease" || fromYAML.APIVersion != "coordination.k8s.io/v1" {
			t.Errorf("-o yaml type meta: %+v", fromYAML.TypeMeta)
		}
		// kubectl hides managedFields unless asked.
		want := stored.DeepCopy()
		want.ManagedFields = nil
		fromYAML.TypeMeta = metav1.TypeMeta{}
		if diff := cmp.Diff(want, &fromYAML); diff != "" {
			t.Errorf("-o yaml vs stored (-stored +yaml):\n%s", diff)
		}
		var withMF coordinationv1.Lease
		if err := yaml.Unmarshal([]byte(k.ok("", "get", "lease", "held", "-o", "yaml", "--show-managed-fields")), &withMF); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(stored.ManagedFields, withMF.ManagedFields); diff != "" {
			t.Errorf("--show-managed-fields (-stored +yaml):\n%s", diff)
		}

		var list struct {
			Kind  string                 `json:"kind"`
			Items []coordinationv1.Lease `json:"items"`
		}
		if err := json.Unmarshal([]byte(k.ok("", "get", "leases", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		storedList, err := c.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			list.Items[i].TypeMeta = metav1.TypeMeta{}
		}
		for i := range storedList.Items {
			storedList.Items[i].ManagedFields = nil
		}
		if diff := cmp.Diff(storedList.Items, list.Items); list.Kind != "List" || diff != "" {
			t.Errorf("-o json (kind %s) vs stored (-stored +json):\n%s", list.Kind, diff)
		}
	})

	t.Run("jsonpath, custom-columns, name", func(t *testing.T) {
		if got := k.ok("", "get", "lease", "held", "-o", "jsonpath={.spec.holderIdentity}"); got != "alice" {
			t.Errorf("-o jsonpath: %q", got)
		}
		got := k.ok("", "get", "leases", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.spec.leaseTransitions}{"\n"}{end}`)
		if want := "bare:\nexpired:7\nheld:0\nreleased:3\n"; got != want {
			t.Errorf("-o jsonpath range: %q, want %q", got, want)
		}
		rows := table(t, "custom-columns", k.ok("", "get", "leases", "-o", "custom-columns=N:.metadata.name,HOLDER:.spec.holderIdentity,D:.spec.leaseDurationSeconds"), "N", "HOLDER", "D")
		want := [][]string{{"bare", "<none>", "<none>"}, {"expired", "bob", "15"}, {"held", "alice", "3600"}, {"released", "", "<none>"}}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("-o custom-columns (-want +got):\n%s", diff)
		}
		wantOutput(t, "-o name", k.ok("", "get", "leases", "-o", "name"),
			"lease.coordination.k8s.io/bare", "lease.coordination.k8s.io/expired", "lease.coordination.k8s.io/held", "lease.coordination.k8s.io/released")
	})

	t.Run("labels", func(t *testing.T) {
		rows := dropAge(t, table(t, "--show-labels", k.ok("", "get", "leases", "--show-labels"), "NAME", "HOLDER", "AGE", "LABELS"), 2)
		want := [][]string{{"bare", "", "<none>"}, {"expired", "bob", "team=b"}, {"held", "alice", "team=a"}, {"released", "", "team=a"}}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("--show-labels (-want +got):\n%s", diff)
		}
		rows = dropAge(t, table(t, "-L", k.ok("", "get", "leases", "-L", "team", "-l", "team"), "NAME", "HOLDER", "AGE", "TEAM"), 2)
		want = [][]string{{"expired", "bob", "b"}, {"held", "alice", "a"}, {"released", "", "a"}}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("-L team -l team (-want +got):\n%s", diff)
		}
		rows = dropAge(t, table(t, "-l team=a", k.ok("", "get", "leases", "-l", "team=a", "--field-selector", "metadata.name!=held"), "NAME", "HOLDER", "AGE"), 2)
		if diff := cmp.Diff([][]string{{"released", ""}}, rows); diff != "" {
			t.Errorf("-l and --field-selector (-want +got):\n%s", diff)
		}
	})

	t.Run("sort-by", func(t *testing.T) {
		// --sort-by needs whole objects in the table: kubectl asks for
		// includeObject=Object.
		out, errOut, err := k.run("", "get", "leases", "-l", "team", "--sort-by=.spec.leaseTransitions", "-v=6")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		if !strings.Contains(errOut, "includeObject=Object") {
			t.Errorf("kubectl did not ask for includeObject=Object:\n%s", errOut)
		}
		rows := dropAge(t, table(t, "--sort-by", out, "NAME", "HOLDER", "AGE"), 2)
		if diff := cmp.Diff([][]string{{"held", "alice"}, {"released", ""}, {"expired", "bob"}}, rows); diff != "" {
			t.Errorf("--sort-by=.spec.leaseTransitions (-want +got):\n%s", diff)
		}
		out = k.ok("", "get", "leases", "-l", "team", "--sort-by=.spec.holderIdentity", "-o", "wide")
		rows = table(t, "--sort-by -o wide", out, "NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS", "EXPIRED")
		var names []string
		for _, r := range rows {
			names = append(names, r[0])
		}
		if want := []string{"released", "held", "expired"}; !slices.Equal(names, want) {
			t.Errorf("--sort-by=.spec.holderIdentity: %v, want %v", names, want)
		}
	})

	t.Run("chunks", func(t *testing.T) {
		// kubectl lists in pages (--chunk-size, 500 by default) and
		// joins the Table pages; pages of one lease must print the same.
		// The cells that tell time (AGE, RENEWED) may tick between runs.
		timeless := func(what, out string) [][]string {
			rows := table(t, what, out, "NAME", "HOLDER", "AGE", "DURATION", "RENEWED", "TRANSITIONS", "EXPIRED")
			for i, r := range rows {
				rows[i] = slices.Delete(slices.Clone(r), 4, 5)
				rows[i] = slices.Delete(rows[i], 2, 3)
			}
			return rows
		}
		whole := timeless("--chunk-size=0", k.ok("", "get", "leases", "-o", "wide", "--chunk-size=0"))
		if len(whole) != 4 {
			t.Fatalf("get leases --chunk-size=0: %q", whole)
		}
		out, errOut, err := k.run("", "get", "leases", "-o", "wide", "--chunk-size=1", "-v=6")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		if pages := strings.Count(errOut, "limit=1"); pages < 4 {
			t.Errorf("kubectl asked for %d pages of 1, want 4 or more:\n%s", pages, errOut)
		}
		if diff := cmp.Diff(whole, timeless("--chunk-size=1", out)); diff != "" {
			t.Errorf("in pages of 1 (-whole +pages):\n%s", diff)
		}
		wantOutput(t, "-o name in pages", k.ok("", "get", "leases", "-o", "name", "--chunk-size=3"),
			"lease.coordination.k8s.io/bare", "lease.coordination.k8s.io/expired", "lease.coordination.k8s.io/held", "lease.coordination.k8s.io/released")
		if got, want := k.ok("", "get", "leases", "-A", "--chunk-size=2", "--no-headers", "-o", "custom-columns=N:.metadata.name"), "bare\nexpired\nheld\nreleased\n"; got != want {
			t.Errorf("get leases -A in pages of 2: %q, want %q", got, want)
		}
	})

	t.Run("endpoints and namespaces", func(t *testing.T) {
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "many"},
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "fd00::1"}},
				NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Name: "a", Port: 80}, {Name: "b", Port: 443}}}}})
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "none"}})
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "unready"},
			Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}})
		rows := dropAge(t, table(t, "get endpoints -o wide", k.ok("", "get", "endpoints", "-o", "wide"), "NAME", "ENDPOINTS", "AGE"), 2)
		want := [][]string{{"many", "10.0.0.1:80,10.0.0.2:80,[fd00::1]:80 + 3 more..."}, {"none", "<none>"}, {"unready", ""}}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("get endpoints -o wide (-want +got):\n%s", diff)
		}
		if got := k.ok("", "get", "ep", "many", "-o", "jsonpath={.subsets[0].ports[1].protocol}"); got != "TCP" {
			t.Errorf("get ep -o jsonpath: %q", got)
		}
		rows = table(t, "get ns", k.ok("", "get", "ns", "default", "-o", "wide"), "NAME", "STATUS", "AGE")
		if len(rows) != 1 || rows[0][0] != "default" || rows[0][1] != "Active" {
			t.Errorf("get ns default: %q", rows)
		}
		if got := k.ok("", "get", "ns", "default", "-o", "jsonpath={.status.phase} {.spec.finalizers}"); got != `Active ["kubernetes"]` {
			t.Errorf("get ns -o jsonpath: %q", got)
		}
	})
}

// running is a kubectl started in the background.
type running struct {
	cmd      *exec.Cmd
	out, err lockedBuffer
	done     chan error
}

// lockedBuffer is a bytes.Buffer that a test may read while the process
// writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watching waits until kubectl (run with -v=6) has logged a watch request
// answered by the server, so that what the test does next happens while
// kubectl watches.
func (r *running) watching(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.err.String(), "watch=true") || !strings.Contains(r.err.String(), "200 OK") {
		select {
		case err := <-r.done:
			t.Fatalf("kubectl %s ended before watching (%v):\n%s%s", strings.Join(r.cmd.Args[1:], " "), err, r.out.String(), r.err.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl %s not watching after 30s:\n%s", strings.Join(r.cmd.Args[1:], " "), r.err.String())
		}
	}
}

// start starts kubectl with args; finish waits for it.
func (k *kubectl) start(args ...string) *running {
	k.t.Helper()
	r := &running{cmd: exec.Command(kubectlPath, args...), done: make(chan error, 1)}
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "HOME="+k.t.TempDir())
	r.cmd.Env = append(r.cmd.Env, k.env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	k.t.Cleanup(func() { _ = r.cmd.Process.Kill() })
	return r
}

// stillRunning fails the test if kubectl ends within d.
func (r *running) stillRunning(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case err := <-r.done:
		t.Fatalf("kubectl %s ended early (%v):\n%s%s", strings.Join(r.cmd.Args[1:], " "), err, r.out.String(), r.err.String())
	case <-time.After(d):
	}
}

// finish waits for kubectl and returns its stdout; it fails the test unless
// kubectl succeeds within 30 s.
func (r *running) finish(t *testing.T) string {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.cmd.Args[1:], " "), err, r.out.String(), r.err.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl %s still running after 30s", strings.Join(r.cmd.Args[1:], " "))
	}
	return r.out.String()
}

// TestKubectlWait: kubectl wait lists then watches one object by name (a
// metadata.name field selector) until a condition holds: a jsonpath value,
// the object's creation, its deletion; it times out when nothing happens.
func TestKubectlWait(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()
	leases := c.CoordinationV1().Leases("default")
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w"}})
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other"}})

	w := k.start("wait", "lease/w", "--for=jsonpath={.spec.holderIdentity}=alice", "--timeout=30s", "-v=6")
	w.watching(t)
	w.stillRunning(t, 200*time.Millisecond)
	// A change to another lease does not wake it.
	other := getLease(t, c, "default", "other")
	other.Spec.HolderIdentity = ptr("alice")
	if _, err := leases.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.stillRunning(t, 200*time.Millisecond)
	l := getLease(t, c, "default", "w")
	l.Spec.HolderIdentity = ptr("alice")
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, "wait --for=jsonpath", w.finish(t), "lease.coordination.k8s.io/w condition met")

	// Met already: no waiting.
	wantOutput(t, "wait, condition met already", k.ok("", "wait", "lease/w", "--for=jsonpath={.spec.holderIdentity}=alice", "--timeout=5s"),
		"lease.coordination.k8s.io/w condition met")

	w = k.start("wait", "lease/late", "--for=create", "--timeout=30s")
	w.stillRunning(t, time.Second)
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "late"}})
	wantOutput(t, "wait --for=create", w.finish(t), "lease.coordination.k8s.io/late condition met")

	// (If the lease were gone before kubectl first looked, it would end
	// at once with nothing to say.)
	w = k.start("wait", "lease/w", "--for=delete", "--timeout=30s", "-v=6")
	w.watching(t)
	w.stillRunning(t, 200*time.Millisecond)
	if err := leases.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, "wait --for=delete", w.finish(t), "lease.coordination.k8s.io/w condition met")

	wantContains(t, "wait timing out", k.fails("", "wait", "lease/late", "--for=jsonpath={.spec.holderIdentity}=bob", "--timeout=1s"),
		"timed out waiting for the condition on leases/late")
}

// watchLines runs kubectl with ctx (a watch) and returns its stdout lines
// as they come.
type watchLines struct {
	t     *testing.T
	lines chan string
	seen  []string
}

func (k *kubectl) watch(t *testing.T, ctx context.Context, args ...string) *watchLines {
	t.Helper()
	cmd := exec.CommandContext(ctx, kubectlPath, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, k.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchLines{t: t, lines: make(chan string, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl %s stderr:\n%s", strings.Join(args, " "), stderr.String())
		}
	})
	return w
}

// next returns the next line matching re, failing after 20 s.
func (w *watchLines) next(re string) []string {
	w.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("watch ended before a line matching %s; lines so far:\n%s", re, strings.Join(w.seen, "\n"))
			}
			w.seen = append(w.seen, l)
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			w.t.Fatalf("no line matching %s within 20s; lines so far:\n%s", re, strings.Join(w.seen, "\n"))
		}
	}
}

// waitWatchers waits until the server holds n watches of leases
// (apiserver_registered_watchers), failing after 20 s.
func waitWatchers(t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	rx := regexp.MustCompile(`(?m)^apiserver_registered_watchers\{[^}]*kind="Lease"[^}]*\} (\d+)$`)
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = "0"
		if m := rx.FindSubmatch(b); m != nil {
			last = string(m[1])
		}
		if last == strconv.Itoa(n) {
			return
		}
	}
	t.Fatalf("%s lease watches registered after 20s, want %d", last, n)
}

func TestKubectlWatch(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w0"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("first")}})

	t.Run("get leases -w", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := k.watch(t, wctx, "get", "leases", "-w")
		w.next(`^NAME\s+HOLDER\s+AGE$`)
		w.next(`^w0\s+first\s+\d+s$`)
		createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("new")}})
		w.next(`^w1\s+new\s+\d+s$`)
		if _, err := c.CoordinationV1().Leases("default").Patch(ctx, "w0", "application/merge-patch+json", []byte(`{"spec":{"holderIdentity":"second"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^w0\s+second\s+\d+s$`)
		if err := c.CoordinationV1().Leases("default").Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^w1\s+new\s+\d+s$`)
	})

	t.Run("get lease NAME -w", func(t *testing.T) {
		// One object: kubectl watches it by name from resourceVersion 0
		// and drops the synthetic ADDED it expects first, so a server
		// that did not send it would swallow the first real change.
		// kubectl prints what it got, then starts its watch: a change made
		// before the watch reaches the server is in that synthetic ADDED
		// and dropped with it. So change only once the server holds the
		// watch (and no other: the last subtest's kubectl must be gone).
		waitWatchers(t, c, 0)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := k.watch(t, wctx, "get", "lease", "w0", "-w")
		w.next(`^NAME\s+HOLDER\s+AGE$`)
		w.next(`^w0\s+second\s+\d+s$`)
		waitWatchers(t, c, 1)
		for _, holder := range []string{"third", "second"} {
			if _, err := c.CoordinationV1().Leases("default").Patch(ctx, "w0", "application/merge-patch+json", []byte(`{"spec":{"holderIdentity":"`+holder+`"}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			w.next(`^w0\s+` + holder + `\s+\d+s$`)
		}
	})

	t.Run("get leases -w -o wide --output-watch-events", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := k.watch(t, wctx, "get", "leases", "-w", "-o", "wide", "--output-watch-events")
		w.next(`^EVENT\s+NAME\s+HOLDER\s+AGE\s+DURATION\s+RENEWED\s+TRANSITIONS\s+EXPIRED$`)
		w.next(`^ADDED\s+w0\s+second\s+\d+s\s+<none>\s+<none>\s+<none>\s+true$`)
		if _, err := c.CoordinationV1().Leases("default").Patch(ctx, "w0", "application/merge-patch+json",
			[]byte(`{"spec":{"leaseDurationSeconds":60,"leaseTransitions":1}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^MODIFIED\s+w0\s+second\s+\d+s\s+60s\s+<none>\s+1\s+true$`)
		if err := c.CoordinationV1().Leases("default").Delete(ctx, "w0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^DELETED\s+w0\s+second\s+\d+s\s+60s\s+<none>\s+1\s+true$`)
	})

	t.Run("get endpoints -A -w", func(t *testing.T) {
		// kubectl prints the header with the first row; start with one.
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e0"}})
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := k.watch(t, wctx, "get", "endpoints", "-A", "-w", "--output-watch-events")
		w.next(`^EVENT\s+NAMESPACE\s+NAME\s+ENDPOINTS\s+AGE$`)
		w.next(`^ADDED\s+default\s+e0\s+<none>\s+\d+s$`)
		createEndpoints(t, c, "other", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e1"},
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}})
		w.next(`^ADDED\s+other\s+e1\s+10\.0\.0\.1:80\s+\d+s$`)
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e2"}})
		w.next(`^ADDED\s+default\s+e2\s+<none>\s+\d+s$`)
		if _, err := c.CoreV1().Endpoints("other").Patch(ctx, "e1", "application/strategic-merge-patch+json",
			[]byte(`{"subsets":[{"addresses":[{"ip":"10.0.0.2"}],"ports":[{"port":81}]}]}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^MODIFIED\s+other\s+e1\s+10\.0\.0\.2:81\s+\d+s$`)
		if err := c.CoreV1().Endpoints("other").Delete(ctx, "e1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^DELETED\s+other\s+e1\s+10\.0\.0\.2:81\s+\d+s$`)
	})

	t.Run("get endpoints -A -w without events", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := k.watch(t, wctx, "get", "endpoints", "-A", "-w")
		w.next(`^NAMESPACE\s+NAME\s+ENDPOINTS\s+AGE$`)
		w.next(`^default\s+e2\s+<none>\s+\d+s$`)
		if _, err := c.CoreV1().Endpoints("default").Patch(ctx, "e2", "application/merge-patch+json",
			[]byte(`{"subsets":[{"addresses":[{"ip":"10.9.0.1"}]}]}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^default\s+e2\s+10\.9\.0\.1\s+\d+s$`)
	})
}

func TestKubectlDelete(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()
	for _, n := range []string{"d1", "d2", "d3"} {
		app := "x"
		if n == "d3" {
			app = "y"
		}
		createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": app}}})
	}
	for _, n := range []string{"e1", "e2"} {
		createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": "x"}}})
	}

	wantOutput(t, "delete by name", k.ok("", "delete", "lease", "d1"), `lease.coordination.k8s.io "d1" deleted from default namespace`)
	_, err := c.CoordinationV1().Leases("default").Get(ctx, "d1", metav1.GetOptions{})
	wantGone(t, err, "d1")

	wantOutput(t, "delete --dry-run=server", k.ok("", "delete", "lease", "d2", "--dry-run=server"), `lease.coordination.k8s.io "d2" deleted from default namespace (server dry run)`)
	getLease(t, c, "default", "d2")

	wantOutput(t, "delete -l", k.ok("", "delete", "leases,endpoints", "-l", "app=x"),
		`lease.coordination.k8s.io "d2" deleted from default namespace`, `endpoints "e1" deleted from default namespace`, `endpoints "e2" deleted from default namespace`)
	if l, err := c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "d3" {
		t.Errorf("leases after delete -l: %v %v", l, err)
	}
	if e, err := c.CoreV1().Endpoints("default").List(ctx, metav1.ListOptions{}); err != nil || len(e.Items) != 0 {
		t.Errorf("endpoints after delete -l: %v %v", e, err)
	}

	createEndpoints(t, c, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e3"}})
	wantOutput(t, "delete --all", k.ok("", "delete", "leases,endpoints", "--all"),
		`lease.coordination.k8s.io "d3" deleted from default namespace`, `endpoints "e3" deleted from default namespace`)
	if l, err := c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("leases after delete --all: %v %v", l, err)
	}

	manifest := file(t, "objs.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: f1
---
apiVersion: v1
kind: Endpoints
metadata:
  name: f1
`)
	k.ok("", "apply", "-f", manifest)
	wantOutput(t, "delete -f", k.ok("", "delete", "-f", manifest),
		`lease.coordination.k8s.io "f1" deleted from default namespace`, `endpoints "f1" deleted from default namespace`)
	_, err = c.CoordinationV1().Leases("default").Get(ctx, "f1", metav1.GetOptions{})
	wantGone(t, err, "lease f1")
	_, err = c.CoreV1().Endpoints("default").Get(ctx, "f1", metav1.GetOptions{})
	wantGone(t, err, "endpoints f1")

	wantContains(t, "delete missing", k.fails("", "delete", "lease", "nope"), `Error from server (NotFound): leases.coordination.k8s.io "nope" not found`)
	wantOutput(t, "delete --ignore-not-found", k.ok("", "delete", "lease", "nope", "--ignore-not-found"))
	wantOutput(t, "delete -f of deleted objects", k.ok("", "delete", "-f", manifest, "--ignore-not-found"))

	// A finalizer holds the object; removing it with kubectl patch
	// completes the delete.
	createLease(t, c, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "fin", Finalizers: []string{"example.com/hold"}}})
	wantOutput(t, "delete held by a finalizer", k.ok("", "delete", "lease", "fin", "--wait=false"), `lease.coordination.k8s.io "fin" deleted from default namespace`)
	if l := getLease(t, c, "default", "fin"); l.DeletionTimestamp == nil {
		t.Errorf("lease with a finalizer: no deletionTimestamp")
	}
	wantOutput(t, "finalizer removal", k.ok("", "patch", "lease", "fin", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`), "lease.coordination.k8s.io/fin patched")
	_, err = c.CoordinationV1().Leases("default").Get(ctx, "fin", metav1.GetOptions{})
	wantGone(t, err, "lease fin after its finalizer was removed")
}

func TestKubectlNamespaces(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()

	wantOutput(t, "create namespace", k.ok("", "create", "namespace", "team-a"), "namespace/team-a created")
	wantContains(t, "create existing namespace", k.fails("", "create", "namespace", "team-a"), `Error from server (AlreadyExists): namespaces "team-a" already exists`)
	rows := table(t, "get ns", k.ok("", "get", "ns", "team-a"), "NAME", "STATUS", "AGE")
	if len(rows) != 1 || rows[0][0] != "team-a" || rows[0][1] != "Active" || !ageRE.MatchString(rows[0][2]) {
		t.Errorf("get ns team-a: %q", rows)
	}
	out := k.ok("", "get", "ns")
	for _, ns := range []string{"default", "kube-node-lease", "kube-public", "kube-system", "team-a"} {
		if !regexp.MustCompile(`(?m)^` + ns + `\s+Active\s+\d+s$`).MatchString(out) {
			t.Errorf("get ns lacks %s:\n%s", ns, out)
		}
	}

	contents := `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: l
spec:
  holderIdentity: h
---
apiVersion: v1
kind: Endpoints
metadata:
  name: e
subsets:
- addresses:
  - ip: 10.0.0.1
`
	wantOutput(t, "apply into the namespace", k.ok(contents, "-n", "team-a", "apply", "-f", "-"), "lease.coordination.k8s.io/l created", "endpoints/e created")
	wantContains(t, "create in a missing namespace", k.fails(contents, "-n", "missing", "create", "-f", "-"),
		`Error from server (NotFound): error when creating "STDIN": namespaces "missing" not found`)

	// kubectl waits until the namespace and its contents are gone.
	wantOutput(t, "delete namespace", k.ok("", "delete", "ns", "team-a"), `namespace "team-a" deleted`)
	wantContains(t, "get deleted namespace", k.fails("", "get", "ns", "team-a"), `Error from server (NotFound): namespaces "team-a" not found`)
	if l, err := c.CoordinationV1().Leases("team-a").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("leases left in the deleted namespace: %v %v", l, err)
	}
	if e, err := c.CoreV1().Endpoints("team-a").List(ctx, metav1.ListOptions{}); err != nil || len(e.Items) != 0 {
		t.Errorf("endpoints left in the deleted namespace: %v %v", e, err)
	}
	wantContains(t, "delete default", k.fails("", "delete", "ns", "default"), `Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted`)

	// Namespaces take labels, and server-side apply.
	wantOutput(t, "label namespace", k.ok("", "label", "ns", "default", "team=core"), "namespace/default labeled")
	nsApply := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-c\n  labels:\n    tier: gold\n"
	wantOutput(t, "apply --server-side namespace", k.ok(nsApply, "apply", "--server-side", "-f", "-"), "namespace/team-c serverside-applied")
	if ns, err := c.CoreV1().Namespaces().Get(ctx, "team-c", metav1.GetOptions{}); err != nil || ns.Labels["tier"] != "gold" || ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("applied namespace: %+v %v", ns, err)
	}
	if ns, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil || ns.Labels["team"] != "core" {
		t.Errorf("labelled namespace: %+v %v", ns, err)
	}

	// A namespace created with kubectl create -f and deleted with delete -f.
	nsFile := file(t, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n")
	wantOutput(t, "create -f namespace", k.ok("", "create", "-f", nsFile), "namespace/team-b created")
	if ns, err := c.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{}); err != nil || ns.Status.Phase != corev1.NamespaceActive ||
		!slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) || ns.Labels["kubernetes.io/metadata.name"] != "team-b" {
		t.Errorf("namespace team-b: %+v %v", ns, err)
	}
	wantOutput(t, "delete -f namespace", k.ok("", "delete", "-f", nsFile), `namespace "team-b" deleted`)
	_, err := c.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{})
	wantGone(t, err, "namespace team-b")
}

func TestKubectlDiff(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("kubectl diff needs a diff program")
	}
	s := testserver.Start(t)
	k := newKubectl(t, s).with("TMPDIR=" + t.TempDir())
	c := s.Client(t)
	v1 := file(t, "d.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: d
spec:
  holderIdentity: alice
  leaseDurationSeconds: 15
`)
	k.ok("", "apply", "-f", v1)
	before := getLease(t, c, "default", "d")
	// kubectl diff exits 0 without differences and 1 with some; it asks
	// the server for the merged object with a dry-run patch (client-side)
	// or a dry-run apply (--server-side).
	if out, errOut, err := k.run("", "diff", "-f", v1); err != nil || out != "" {
		t.Errorf("kubectl diff of an unchanged object: %v\n%s\n%s", err, out, errOut)
	}
	// Server-side, the only difference is the last-applied annotation,
	// which the server rewrites for manager "kubectl" from what it applies
	// (managedfields' last-applied updater) without kubectl's
	// "annotations":{}.
	out, _, _ := k.run("", "diff", "-f", v1, "--server-side", "--force-conflicts")
	for _, l := range strings.Split(out, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") &&
			!strings.HasPrefix(strings.TrimSpace(l[1:]), `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease"`) {
			t.Errorf("kubectl diff --server-side of an unchanged object shows %q:\n%s", l, out)
		}
	}
	v2 := file(t, "d.yaml", strings.Replace(readFile(t, v1), "alice", "bob", 1))
	for _, ssa := range []bool{false, true} {
		args := []string{"diff", "-f", v2}
		if ssa {
			args = append(args, "--server-side", "--force-conflicts")
		}
		out, errOut, err := k.run("", args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("kubectl %s: %v, want exit code 1\n%s", strings.Join(args, " "), err, errOut)
		}
		wantContains(t, strings.Join(args, " "), out, "-  holderIdentity: alice", "+  holderIdentity: bob")
	}
	// A new object diffs against nothing.
	out, _, _ = k.run(strings.Replace(readFile(t, v1), "name: d", "name: fresh", 1), "diff", "-f", "-")
	wantContains(t, "diff of a new object", out, "+  name: fresh", "+  holderIdentity: alice")
	if after := getLease(t, c, "default", "d"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("kubectl diff wrote")
	}
	_, err := c.CoordinationV1().Leases("default").Get(t.Context(), "fresh", metav1.GetOptions{})
	wantGone(t, err, "lease diffed into existence")
}

// TestKubectlQuietWatch: kubectl get -w on a quiet namespace keeps
// watching past one event, over HTTP/2 and, with DISABLE_HTTP2=1
// (client-go's switch), HTTP/1.1. The server's write timeout is shortened to a second, so that
// a few seconds of quiet stand for many minutes of the default 60 s.
func TestKubectlQuietWatch(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *server.Config) { c.WatchWriteTimeout = time.Second })
	c := s.Client(t)
	ctx := t.Context()
	for i, proto := range []struct{ name, env string }{{"HTTP/2", ""}, {"HTTP/1.1", "DISABLE_HTTP2=1"}} {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			ns := fmt.Sprintf("quiet-%d", i)
			if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			createLease(t, c, ns, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}})
			k := newKubectl(t, s)
			if proto.env != "" {
				k = k.with(proto.env)
			}
			r := k.start("-n", ns, "get", "leases", "-w", "-v=6")
			r.watching(t)
			patch := func(holder string) {
				t.Helper()
				if _, err := c.CoordinationV1().Leases(ns).Patch(ctx, "q", "application/merge-patch+json", []byte(`{"spec":{"holderIdentity":"`+holder+`"}}`), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			patch("b")
			waitOutput(t, r, `q\s+b\s`)
			r.stillRunning(t, 6*time.Second)
			patch("c")
			waitOutput(t, r, `q\s+c\s`)
			if strings.Contains(r.err.String(), "INTERNAL_ERROR") || strings.Contains(r.err.String(), "watch ended with error") {
				t.Errorf("kubectl logged a broken watch:\n%s", r.err.String())
			}
		})
	}
}

// waitOutput waits until kubectl's stdout matches re.
func waitOutput(t *testing.T, r *running, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for !rx.MatchString(r.out.String()) {
		select {
		case err := <-r.done:
			t.Fatalf("kubectl ended (%v) before printing %s:\n%s%s", err, re, r.out.String(), r.err.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl did not print %s within 20s:\n%s", re, r.out.String())
		}
	}
}

// TestKubectlDescribeStuckNamespace: a namespace held by a lease's
// finalizer says why in its conditions, with kube-controller-manager's
// types, reasons and messages, and kubectl describe shows them.
func TestKubectlDescribeStuckNamespace(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stuck"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := createLease(t, c, "stuck", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}})
	if err := c.CoreV1().Namespaces().Delete(ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = k.ok("", "describe", "namespace", "stuck")
		if strings.Contains(out, "NamespaceFinalizersRemaining") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, re := range []string{
		`(?m)^Status:\s+Terminating$`,
		`(?m)^\s+NamespaceContentRemaining\s+True\s+.*SomeResourcesRemain\s+Some resources are remaining: leases\.coordination\.k8s\.io has 1 resource instances$`,
		`(?m)^\s+NamespaceFinalizersRemaining\s+True\s+.*SomeFinalizerRemain\s+Some finalizers are remaining: example\.com/hold in 1 resource instances$`,
		`(?m)^\s+NamespaceDeletionContentFailure\s+False\s+.*ContentDeleted\s+All content successfully deleted, may be waiting on finalization$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe namespace lacks %s:\n%s", re, out)
		}
	}
	// Releasing the lease lets the namespace go.
	held = getLease(t, c, "stuck", "held")
	held.Finalizers = nil
	if _, err := c.CoordinationV1().Leases("stuck").Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := c.CoreV1().Namespaces().Get(ctx, "stuck", metav1.GetOptions{}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the namespace stayed after its last object went")
		}
	}
}
