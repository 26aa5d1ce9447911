package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// slicesYAML is a Service "web"'s slice as the EndpointSlice controller
// writes it, with four addresses (one more than a table cell shows), and
// another Service's slice.
const slicesYAML = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-x1
  namespace: slices
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: ["10.0.0.1", "10.0.0.2"]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node-1
  zone: zone-a
  hints:
    forZones: [{name: zone-a}]
- addresses: ["10.0.0.3", "10.0.0.4"]
  conditions: {ready: false}
  zone: zone-b
ports:
- name: http
  port: 80
- name: https
  port: 443
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-x1
  namespace: slices
  labels:
    kubernetes.io/service-name: db
addressType: IPv6
endpoints:
- addresses: ["2001:db8::1"]
ports:
- port: 5432
`

// TestKubectlEndpointSlices: kubectl apply, get (plain, wide, by label,
// watching), describe, patch and explain on EndpointSlices; the table is
// the server's.
func TestKubectlEndpointSlices(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	k := newKubectl(t, s)
	c := s.Client(t)
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slices"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := file(t, "slices.yaml", slicesYAML)
	wantOutput(t, "apply", k.ok("", "apply", "-f", path),
		"endpointslice.discovery.k8s.io/web-x1 created",
		"endpointslice.discovery.k8s.io/db-x1 created")
	// Applying again, kubectl's three-way patch still carries the ports:
	// the live ones have the defaulted protocol (and name) the file lacks,
	// and an atomic list differing at all is sent whole. kubectl says
	// "configured"; the server finds nothing changed and writes nothing.
	rvs := func() string {
		return k.ok("", "get", "endpointslices", "-n", "slices", "-o", "jsonpath={.items[*].metadata.resourceVersion} {.items[*].metadata.generation}")
	}
	before := rvs()
	wantOutput(t, "apply again", k.ok("", "apply", "-f", path),
		"endpointslice.discovery.k8s.io/web-x1 configured",
		"endpointslice.discovery.k8s.io/db-x1 configured")
	if after := rvs(); after != before {
		t.Errorf("applying the same file wrote: %q -> %q", before, after)
	}

	checkAges := func(what string, rows [][]string) {
		t.Helper()
		for _, row := range rows {
			if !ageRE.MatchString(row[len(row)-1]) {
				t.Errorf("%s: row %q: age %q", what, row, row[len(row)-1])
			}
			row[len(row)-1] = "AGE"
		}
	}
	header := []string{"NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"}
	web := []string{"web-x1", "IPv4", "80,443", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "AGE"}
	db := []string{"db-x1", "IPv6", "5432", "2001:db8::1", "AGE"}
	for _, args := range [][]string{
		{"get", "endpointslices", "-n", "slices"},
		{"get", "endpointslice.discovery.k8s.io", "-n", "slices"},
		// All columns are of priority 0: wide shows no more.
		{"get", "endpointslices", "-n", "slices", "-o", "wide"},
	} {
		what := strings.Join(args, " ")
		rows := table(t, what, k.ok("", args...), header...)
		checkAges(what, rows)
		wantRows(t, what, rows, db, web)
	}
	rows := table(t, "get by label", k.ok("", "get", "endpointslices", "-n", "slices", "-l", "kubernetes.io/service-name=web"), header...)
	checkAges("get by label", rows)
	wantRows(t, "get by label", rows, web)
	// No short name: kube-apiserver has none for endpointslices.
	wantContains(t, "get eps", k.fails("", "get", "eps", "-n", "slices"), `the server doesn't have a resource type "eps"`)

	out := k.ok("", "describe", "endpointslice", "web-x1", "-n", "slices")
	for _, re := range []string{
		`(?m)^Name:\s+web-x1$`,
		`(?m)^Labels:\s+kubernetes.io/service-name=web$`,
		`(?m)^AddressType:\s+IPv4$`,
		`(?m)^Ports:\n  Name\s+Port\s+Protocol\n  ----\s+----\s+--------\n  http\s+80\s+TCP\n  https\s+443\s+TCP$`,
		`(?m)^Endpoints:$`,
		`(?m)^  - Addresses:\s+10\.0\.0\.1, 10\.0\.0\.2\n    Conditions:\n      Ready:\s+true\n    Hostname:\s+<unset>\n    NodeName:\s+node-1\n    Zone:\s+zone-a$`,
		`(?m)^  - Addresses:\s+10\.0\.0\.3, 10\.0\.0\.4\n    Conditions:\n      Ready:\s+false\n    Hostname:\s+<unset>\n    NodeName:\s+<unset>\n    Zone:\s+zone-b$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe endpointslice lacks %s:\n%s", re, out)
		}
	}
	// describe does not show hints; the stored object has them.
	if got := k.ok("", "get", "endpointslice", "web-x1", "-n", "slices", "-o", "jsonpath={.endpoints[0].hints.forZones[0].name}"); got != "zone-a" {
		t.Errorf("hints: %q", got)
	}

	// A strategic merge patch (kubectl's default) replaces the ports: the
	// list has no merge key.
	wantOutput(t, "patch", k.ok("", "patch", "endpointslice", "web-x1", "-n", "slices", "-p", `{"ports":[{"name":"http","port":8080}]}`),
		"endpointslice.discovery.k8s.io/web-x1 patched")
	wantOutput(t, "ports after patch", k.ok("", "get", "endpointslice", "web-x1", "-n", "slices", "-o", "jsonpath={.ports[*].port} {.ports[0].protocol} {.metadata.generation}"),
		"8080 TCP 2")
	errOut := k.fails("", "patch", "endpointslice", "web-x1", "-n", "slices", "--type=merge", "-p", `{"addressType":"FQDN"}`)
	wantContains(t, "patch addressType", errOut, `addressType: Invalid value: "FQDN": field is immutable`)

	out = k.ok("", "explain", "endpointslice.endpoints.conditions")
	wantContains(t, "explain endpointslice.endpoints.conditions", out,
		"GROUP:      discovery.k8s.io", "KIND:       EndpointSlice", "VERSION:    v1",
		"FIELD: conditions <EndpointConditions>")
	wantContains(t, "explain endpointslice.endpoints.conditions description", normalize(out), normalize(discoveryv1.EndpointConditions{}.SwaggerDoc()["ready"]))
	for _, f := range []string{"ready", "serving", "terminating"} {
		if re := `(?m)^  ` + f + `\t<boolean>$`; !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain endpointslice.endpoints.conditions lacks %s:\n%s", re, out)
		}
	}

	t.Run("get -w", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		w := k.watch(t, wctx, "get", "endpointslices", "-n", "slices", "-w")
		w.next(`^NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE$`)
		w.next(`^db-x1\s+IPv6\s+5432\s+2001:db8::1\s+\d+s$`)
		w.next(`^web-x1\s+IPv4\s+8080\s+10\.0\.0\.1,10\.0\.0\.2,10\.0\.0\.3 \+ 1 more\.\.\.\s+\d+s$`)
		if _, err := c.DiscoveryV1().EndpointSlices("slices").Patch(ctx, "web-x1", types.MergePatchType,
			[]byte(`{"endpoints":[{"addresses":["10.0.0.9"]}]}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^web-x1\s+IPv4\s+8080\s+10\.0\.0\.9\s+\d+s$`)
		if _, err := c.DiscoveryV1().EndpointSlices("slices").Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "empty"}, AddressType: discoveryv1.AddressTypeFQDN,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.next(`^empty\s+FQDN\s+<unset>\s+<unset>\s+\d+s$`)
	})

	t.Run("an applied Endpoints is mirrored", func(t *testing.T) {
		path := file(t, "endpoints.yaml", `apiVersion: v1
kind: Endpoints
metadata:
  name: api
  namespace: slices
  labels:
    app: api
subsets:
- addresses: [{ip: 10.0.5.1}, {ip: 10.0.5.2}]
  notReadyAddresses: [{ip: 10.0.5.3}]
  ports: [{name: grpc, port: 9090}]
`)
		k.ok("", "apply", "-f", path)
		var rows [][]string
		deadline := time.Now().Add(20 * time.Second)
		for {
			out := k.ok("", "get", "endpointslices", "-n", "slices", "-l", "kubernetes.io/service-name=api,app=api")
			if strings.Contains(out, "10.0.5.1") {
				rows = table(t, "mirrored slice", out, "NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE")
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no mirrored slice after 20 s:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(rows) != 1 || !strings.HasPrefix(rows[0][0], "api-") || rows[0][1] != "IPv4" || rows[0][2] != "9090" || rows[0][3] != "10.0.5.1,10.0.5.2,10.0.5.3" {
			t.Errorf("mirrored slice rows: %q", rows)
		}
		got := k.ok("", "get", "endpointslices", "-n", "slices", "-l", "kubernetes.io/service-name=api", "-o",
			"jsonpath={.items[0].metadata.labels.endpointslice\\.kubernetes\\.io/managed-by} {.items[0].endpoints[2].conditions.ready} {.items[0].metadata.ownerReferences[0].kind}")
		if got != "endpointslicemirroring-controller.k8s.io false Endpoints" {
			t.Errorf("mirrored slice: %q", got)
		}
	})
}
