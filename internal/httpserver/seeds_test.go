package httpserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// seedEnv makes TestWriteFuzzSeeds (re)write the seed corpora of the fuzz
// targets under testdata/fuzz.
const seedEnv = "LEASEHOLD_WRITE_FUZZ_SEEDS"

// TestWriteFuzzSeeds writes the fuzz targets' seed corpora: payloads
// encoded by client-go's own serializers and apply configurations,
// patches built as kubectl builds them, selectors formatted by
// apimachinery, and continue tokens and resourceVersions handed out by a
// real server.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv(seedEnv) == "" {
		t.Skipf("set %s=1 to rewrite testdata/fuzz", seedEnv)
	}
	p := newFuzzServer(t)
	seeds := map[string][]seed{
		"FuzzDecodeBody":      bodySeeds(t, p),
		"FuzzPatch":           patchSeeds(t),
		"FuzzLabelSelector":   labelSelectorSeeds(),
		"FuzzFieldSelector":   fieldSelectorSeeds(),
		"FuzzContinueToken":   continueSeeds(t, p),
		"FuzzResourceVersion": resourceVersionSeeds(t, p),
	}
	for target, list := range seeds {
		writeSeeds(t, target, list)
	}
}

// seed is one corpus entry: a name and the fuzz function's arguments.
type seed struct {
	name string
	args []any
}

// writeSeeds replaces the seed-* files of a target's corpus; other files
// (crashers, inputs the fuzzer kept) stay.
func writeSeeds(t *testing.T, target string, seeds []seed) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	for _, f := range old {
		os.Remove(f)
	}
	for _, s := range seeds {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range s.args {
			b.WriteString(corpusValue(a) + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d seeds", target, len(seeds))
}

// corpusValue formats a value in the go test fuzz v1 format.
func corpusValue(v any) string {
	switch v := v.(type) {
	case []byte:
		return "[]byte(" + strconv.Quote(string(v)) + ")"
	case string:
		return "string(" + strconv.Quote(v) + ")"
	case uint8:
		return fmt.Sprintf("uint8(%d)", v)
	case int64:
		return fmt.Sprintf("int64(%d)", v)
	case bool:
		return fmt.Sprintf("bool(%t)", v)
	}
	panic(fmt.Sprintf("corpusValue: %T", v))
}

// clientEncode encodes obj as client-go's typed clients do for a media
// type.
func clientEncode(t *testing.T, obj runtime.Object, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no client serializer for %s", mediaType)
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	enc := scheme.Codecs.WithoutConversion().EncoderForVersion(info.Serializer, gvks[0].GroupVersion())
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func micro(s string) *metav1.MicroTime {
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &metav1.MicroTime{Time: tm}
}

func ptrTo[T any](v T) *T { return &v }

// seedObjects are new objects of each kind, as clients create them.
func seedObjects() []runtime.Object {
	return []runtime.Object{
		&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "controller-leader", Labels: map[string]string{"app": "web"}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptrTo("node-1_6f2b"), LeaseDurationSeconds: ptrTo[int32](15),
				AcquireTime: micro("2026-01-01T00:00:00Z"), RenewTime: micro("2026-01-01T00:00:10Z"), LeaseTransitions: ptrTo[int32](3),
			},
		},
		&corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"}},
			Subsets: []corev1.EndpointSubset{{
				Addresses:         []corev1.EndpointAddress{{IP: "10.0.0.1", NodeName: ptrTo("n1"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "3f6c"}}},
				NotReadyAddresses: []corev1.EndpointAddress{{IP: "fd00::2", Hostname: "web-1"}},
				Ports:             []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptrTo("http")}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
			}},
		},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c", Labels: map[string]string{"team": "c"}}},
	}
}

func bodySeeds(t *testing.T, p *inProcess) []seed {
	var out []seed
	objs := seedObjects()
	for kind, obj := range objs {
		for ct, mediaType := range fuzzBodyTypes {
			name := fmt.Sprintf("create-%d-%d", kind, ct)
			out = append(out, seed{name, []any{clientEncode(t, obj, mediaType), uint8(ct), uint8(kind), uint8(0), uint8(0)}})
		}
		// An update sends back the stored object, as a client that read
		// it (client-go's leader election, kubectl replace).
		w := p.mustDo(t, http.StatusOK, "GET", fuzzKinds[kind].seed, "", "")
		stored := objs[kind].DeepCopyObject()
		if err := json.Unmarshal(w.Body.Bytes(), stored); err != nil {
			t.Fatal(err)
		}
		for ct, mediaType := range fuzzBodyTypes {
			name := fmt.Sprintf("update-%d-%d", kind, ct)
			out = append(out, seed{name, []any{clientEncode(t, stored, mediaType), uint8(ct), uint8(kind), uint8(1), uint8(1)}})
		}
	}
	hostile := map[string][]byte{
		"deep-json":    []byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)),
		"deep-object":  []byte(`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"x","annotations":` + strings.Repeat(`{"a":`, 5000) + `"v"` + strings.Repeat("}", 5000) + `}}`),
		"yaml-aliases": []byte("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"),
		"proto-prefix": []byte("k8s\x00\n\x0f\n\x02v1\x12\tEndpoints\x12\xff\xff\xff\xff\x0f"),
		"big-number":   []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x"},"spec":{"leaseDurationSeconds":1e400}}`),
		"bad-utf8":     []byte("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"\xff\xfe\"}}"),
	}
	for name, body := range hostile {
		ct := uint8(0)
		if strings.HasPrefix(name, "yaml") {
			ct = 1
		} else if strings.HasPrefix(name, "proto") {
			ct = 2
		}
		out = append(out, seed{name, []any{body, ct, uint8(1), uint8(0), uint8(1)}})
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func patchSeeds(t *testing.T) []seed {
	const (
		jsonPatch, mergePatch, strategic, apply = uint8(0), uint8(1), uint8(2), uint8(3)
		leaseK, endpointsK, namespaceK          = uint8(0), uint8(1), uint8(2)
	)
	// kubectl apply (client-side) and kubectl edit send a two-way
	// strategic merge patch.
	twoWay := func(original, modified, dataStruct any) []byte {
		p, err := strategicpatch.CreateTwoWayMergePatch(mustJSON(t, original), mustJSON(t, modified), dataStruct)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaseA := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "seed", Labels: map[string]string{"app": "web"}}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a")}}
	leaseB := leaseA
	leaseB.Labels = map[string]string{"app": "web", "tier": "front"}
	leaseB.Spec.HolderIdentity, leaseB.Spec.LeaseDurationSeconds = ptrTo("b"), ptrTo[int32](30)
	epA := corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "seed"}, Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	epB := corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "seed"}, Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.9"}, {IP: "10.0.0.8"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8080}, {Name: "m", Port: 9090}}}}}
	nsA := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "seed", Labels: map[string]string{"team": "seed"}}}
	nsB := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "seed", Labels: map[string]string{"team": "other"}, Annotations: map[string]string{"owner": "x"}}}

	// client-go's Apply sends the JSON of an apply configuration.
	leaseApply := coordinationv1ac.Lease("seed", "default").WithLabels(map[string]string{"app": "web"}).
		WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("c").WithLeaseDurationSeconds(10).WithRenewTime(*micro("2026-01-01T00:01:00Z")))
	epApply := corev1ac.Endpoints("seed", "default").WithSubsets(corev1ac.EndpointSubset().
		WithAddresses(corev1ac.EndpointAddress().WithIP("10.0.0.5")).WithPorts(corev1ac.EndpointPort().WithName("http").WithPort(80)))
	nsApply := corev1ac.Namespace("seed").WithLabels(map[string]string{"team": "applied"})

	return []seed{
		{"json-lease", []any{[]byte(`[{"op":"test","path":"/spec/holderIdentity","value":"a"},{"op":"replace","path":"/spec/holderIdentity","value":"b"},{"op":"add","path":"/metadata/labels/x","value":"y"}]`), jsonPatch, leaseK, uint8(0), false}},
		{"json-endpoints", []any{[]byte(`[{"op":"add","path":"/subsets/0/addresses/-","value":{"ip":"10.0.0.7"}},{"op":"remove","path":"/subsets/0/notReadyAddresses"},{"op":"copy","from":"/subsets/0/ports/0","path":"/subsets/0/ports/-"}]`), jsonPatch, endpointsK, uint8(1), false}},
		{"json-namespace", []any{[]byte(`[{"op":"move","from":"/metadata/labels/team","path":"/metadata/labels/owner"}]`), jsonPatch, namespaceK, uint8(0), false}},
		{"merge-lease", []any{[]byte(`{"metadata":{"labels":{"tier":null}},"spec":{"holderIdentity":"b","leaseTransitions":2}}`), mergePatch, leaseK, uint8(2), false}},
		{"merge-endpoints", []any{[]byte(`{"subsets":[{"addresses":[{"ip":"10.0.0.4"}],"ports":[{"port":81}]}]}`), mergePatch, endpointsK, uint8(0), false}},
		{"merge-namespace", []any{[]byte(`{"metadata":{"annotations":{"a":"b"}},"spec":{"finalizers":[]}}`), mergePatch, namespaceK, uint8(1), false}},
		{"strategic-lease", []any{twoWay(leaseA, leaseB, &coordinationv1.Lease{}), strategic, leaseK, uint8(0), false}},
		{"strategic-endpoints", []any{twoWay(epA, epB, &corev1.Endpoints{}), strategic, endpointsK, uint8(3), false}},
		{"strategic-namespace", []any{twoWay(nsA, nsB, &corev1.Namespace{}), strategic, namespaceK, uint8(0), false}},
		{"strategic-directives", []any{[]byte(`{"metadata":{"$setElementOrder/finalizers":["a"],"finalizers":["a"],"$retainKeys":["labels"],"labels":{"$patch":"replace","x":"y"}}}`), strategic, leaseK, uint8(1), false}},
		{"apply-lease", []any{mustJSON(t, leaseApply), apply, leaseK, uint8(0), false}},
		{"apply-endpoints", []any{mustJSON(t, epApply), apply, endpointsK, uint8(1), true}},
		{"apply-namespace", []any{mustJSON(t, nsApply), apply, namespaceK, uint8(0), true}},
		{"apply-yaml", []any{[]byte("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: seed\n  namespace: default\nspec:\n  holderIdentity: kubectl\n"), apply, leaseK, uint8(1), false}},
	}
}

func labelSelectorSeeds() []seed {
	exprs, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{
		MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "dev"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "example.com/owner", Operator: metav1.LabelSelectorOpExists},
		},
	})
	if err != nil {
		panic(err)
	}
	sels := []string{
		labels.SelectorFromSet(labels.Set{"app": "web"}).String(),
		labels.SelectorFromSet(labels.Set{"app": "db", "env": "dev"}).String(),
		exprs.String(),
		"env notin (prod),app!=db",
		"tier", "!tier", "app==web", "example.com/owner=x", "",
		"a in (", "x=" + strings.Repeat("v", 64),
	}
	var out []seed
	for i, s := range sels {
		out = append(out, seed{fmt.Sprintf("%d", i), []any{s, uint8(i % len(fuzzScopes))}})
	}
	return out
}

func fieldSelectorSeeds() []seed {
	sels := []string{
		fields.OneTermEqualSelector("metadata.name", "l0-1").String(),
		fields.OneTermEqualSelector("metadata.namespace", "team-b").String(),
		fields.AndSelectors(fields.OneTermNotEqualSelector("metadata.name", "seed"), fields.OneTermEqualSelector("metadata.namespace", "default")).String(),
		fields.OneTermEqualSelector("status.phase", "Active").String(),
		fields.OneTermEqualSelector("metadata.name", fields.EscapeValue("a,b=c\\")).String(),
		"metadata.name==seed", "spec.holderIdentity=a", "metadata.name", "",
	}
	var out []seed
	for i, s := range sels {
		out = append(out, seed{fmt.Sprintf("%d", i), []any{s, uint8(i % len(fuzzScopes))}})
	}
	return out
}

// continueSeeds are tokens a real server hands out, and crafted ones in
// kube-apiserver's format.
func continueSeeds(t *testing.T, p *inProcess) []seed {
	var out []seed
	for i, s := range fuzzScopes {
		w := p.mustDo(t, http.StatusOK, "GET", s.path+"?limit=2", "", "")
		var list metav1.List
		if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		if list.Continue != "" {
			out = append(out, seed{fmt.Sprintf("server-%d", i), []any{list.Continue, int64(2), uint8(i)}})
		}
	}
	craft := func(rv int64, start string) string {
		b := mustJSON(t, map[string]any{"v": "meta.k8s.io/v1", "rv": rv, "start": start})
		return base64.RawURLEncoding.EncodeToString(b)
	}
	out = append(out,
		seed{"crafted-other-namespace", []any{craft(5, "team-b/\x00"), int64(1), uint8(0)}},
		seed{"crafted-dotdot", []any{craft(5, "../services/endpoints/default/seed"), int64(0), uint8(1)}},
		seed{"crafted-expired", []any{craft(1, "default/l0-0\x00"), int64(1), uint8(1)}},
		seed{"crafted-negative", []any{craft(-1, "a"), int64(1), uint8(2)}},
		seed{"not-base64", []any{"%%%", int64(1), uint8(3)}},
	)
	return out
}

func resourceVersionSeeds(t *testing.T, p *inProcess) []seed {
	rv := strconv.FormatInt(p.revision(t), 10)
	next := strconv.FormatInt(p.revision(t)+1, 10)
	return []seed{
		{"unset", []any{"", "", int64(0), false, uint8(0)}},
		{"any", []any{"0", "", int64(500), false, uint8(1)}},
		{"current-exact", []any{rv, "Exact", int64(2), false, uint8(1)}},
		{"current-notolderthan", []any{rv, "NotOlderThan", int64(0), false, uint8(2)}},
		{"legacy-paginated", []any{"5", "", int64(1), false, uint8(3)}},
		{"get-current", []any{rv, "", int64(0), true, uint8(0)}},
		{"get-future", []any{next, "", int64(0), true, uint8(1)}},
		{"exact-zero", []any{"0", "Exact", int64(0), false, uint8(0)}},
		{"match-without-rv", []any{"", "NotOlderThan", int64(0), false, uint8(1)}},
		{"not-a-number", []any{"-1", "", int64(0), false, uint8(2)}},
		{"huge", []any{"99999999999999999999", "", int64(0), true, uint8(2)}},
	}
}
