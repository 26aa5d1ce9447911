package integration

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/kindtest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// counter makes each change of a fixture a new one.
var counter atomic.Int64

func nextChange() string { return fmt.Sprint(counter.Add(1)) }

// annotate is a change any kind takes: a new annotation value.
func annotate(obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann["suite/change"] = nextChange()
	meta["annotations"] = ann
}

// TestKinds runs the per-kind conformance suite for every built-in kind
// and for Widget, a kind that exists only in this test, at both of its
// versions: the server learns of it from its description alone.
func TestKinds(t *testing.T) {
	t.Parallel()
	kinds := append(builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true}), widgetKind())
	s := testserver.Start(t, func(c *server.Config) { c.Kinds = kinds })
	storage := func(gk schema.GroupKind) resources.Resource {
		k := resources.Find(kinds, gk)
		if k == nil {
			t.Fatalf("no kind %v", gk)
		}
		return k.Storage()
	}
	fixtures := map[string]kindtest.Fixture{
		"leases": {
			Resource: storage(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}),
			Content: func() map[string]any {
				return map[string]any{"spec": map[string]any{"holderIdentity": "a", "leaseDurationSeconds": int64(15)}}
			},
			Change: func(obj map[string]any) {
				obj["spec"].(map[string]any)["holderIdentity"] = "holder-" + nextChange()
			},
			Invalid:      func(obj map[string]any) { obj["spec"].(map[string]any)["leaseDurationSeconds"] = int64(0) },
			InvalidField: "spec.leaseDurationSeconds",
		},
		"endpoints": {
			Resource: storage(schema.GroupKind{Kind: "Endpoints"}),
			Content: func() map[string]any {
				return map[string]any{"subsets": []any{map[string]any{
					"addresses": []any{map[string]any{"ip": "10.0.0.1"}},
					"ports":     []any{map[string]any{"port": int64(80)}},
				}}}
			},
			Change: annotate,
			Invalid: func(obj map[string]any) {
				obj["subsets"].([]any)[0].(map[string]any)["ports"] = []any{map[string]any{"port": int64(0)}}
			},
			InvalidField: "subsets[0].ports[0].port",
		},
		"endpointslices": {
			Resource: storage(schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}),
			Content: func() map[string]any {
				return map[string]any{
					"addressType": "IPv4",
					"endpoints":   []any{map[string]any{"addresses": []any{"10.0.0.1"}, "conditions": map[string]any{"ready": true}}},
					"ports":       []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}},
				}
			},
			// A metadata change: the suite expects the generation kept,
			// which a change of endpoints or ports would bump.
			Change: annotate,
			Invalid: func(obj map[string]any) {
				obj["endpoints"].([]any)[0].(map[string]any)["addresses"] = []any{"127.0.0.1"}
			},
			InvalidField: "endpoints[0].addresses[0]",
		},
		"events": {
			Resource: storage(schema.GroupKind{Kind: "Event"}),
			Content: func() map[string]any {
				return map[string]any{
					"eventTime": "2026-11-24T10:00:00.000000Z", "type": "Normal", "reason": "Tested", "action": "Test",
					"reportingComponent": "leasehold.dev/kindtest", "reportingInstance": "kindtest-1",
					"involvedObject": map[string]any{"kind": "Lease", "namespace": "elsewhere", "name": "subject"},
				}
			},
			Change:       annotate,
			Invalid:      func(obj map[string]any) { obj["reason"] = "" },
			InvalidField: "reason",
		},
		"events.events.k8s.io": {
			Resource: resources.Find(kinds, schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}).Resources()[1],
			Content: func() map[string]any {
				return map[string]any{
					"eventTime": "2026-11-24T10:00:00.000000Z", "type": "Normal", "reason": "Tested", "action": "Test",
					"reportingController": "leasehold.dev/kindtest", "reportingInstance": "kindtest-1",
					"regarding": map[string]any{"kind": "Lease", "namespace": "elsewhere", "name": "subject"},
				}
			},
			Change:       annotate,
			Invalid:      func(obj map[string]any) { obj["reason"] = "" },
			InvalidField: "reason",
		},
		"namespaces": {
			Resource:     storage(schema.GroupKind{Kind: "Namespace"}),
			Change:       annotate,
			Invalid:      func(obj map[string]any) { obj["metadata"].(map[string]any)["name"] = "not.a.label" },
			InvalidField: "metadata.name",
		},
		"roles":                    rbacRoleFixture(storage(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"})),
		"clusterroles":             rbacRoleFixture(storage(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"})),
		"rolebindings":             rbacBindingFixture(storage(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}), "Role"),
		"clusterrolebindings":      rbacBindingFixture(storage(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}), "ClusterRole"),
		"leasecandidates":          candidateFixture(storage(schema.GroupKind{Group: "coordination.k8s.io", Kind: "LeaseCandidate"})),
		"leasecandidates.v1alpha2": candidateFixture(resources.Find(kinds, schema.GroupKind{Group: "coordination.k8s.io", Kind: "LeaseCandidate"}).Resources()[1]),
		"widgets.v2": {
			Resource: resources.Find(kinds, schema.GroupKind{Group: widgetVersion.Group, Kind: "Widget"}).Resources()[1],
			Content: func() map[string]any {
				return map[string]any{"spec": map[string]any{"diameter": int64(3), "shade": "red"}}
			},
			Change: func(obj map[string]any) {
				spec := obj["spec"].(map[string]any)
				spec["shade"] = "shade-" + nextChange()
			},
			Invalid:      func(obj map[string]any) { obj["spec"].(map[string]any)["diameter"] = int64(-1) },
			InvalidField: "spec.size",
		},
		"widgets": {
			Resource: storage(schema.GroupKind{Group: widgetVersion.Group, Kind: "Widget"}),
			Content: func() map[string]any {
				return map[string]any{"spec": map[string]any{"size": int64(3), "color": "red"}}
			},
			Change: func(obj map[string]any) {
				obj["spec"].(map[string]any)["size"] = widgetSize(obj) + 1
			},
			Invalid:      func(obj map[string]any) { obj["spec"].(map[string]any)["size"] = int64(-1) },
			InvalidField: "spec.size",
		},
	}
	for name, f := range fixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if f.Resource.Kind.Namespaced {
				f.Namespace = "kinds-" + strings.ReplaceAll(name, ".", "-")
				must[*corev1.Namespace](t)(s.Client(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}, metav1.CreateOptions{}))
			}
			kindtest.Run(t, s, f)
		})
	}

	// One Widget, two versions: written at v2, read at v1 and back, its
	// fields converted both ways, selected by v2's field label.
	t.Run("widgets across versions", func(t *testing.T) {
		dyn := must[*dynamic.DynamicClient](t)(dynamic.NewForConfig(s.Config))
		v1 := dyn.Resource(widgetVersion.WithResource("widgets")).Namespace("default")
		v2 := dyn.Resource(widgetVersionV2.WithResource("widgets")).Namespace("default")
		in := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": widgetVersionV2.String(), "kind": "Widget",
			"metadata": map[string]any{"name": "both"},
			"spec":     map[string]any{"diameter": int64(7)},
		}}
		created := must[*unstructured.Unstructured](t)(v2.Create(t.Context(), in, metav1.CreateOptions{}))
		if got := created.Object["spec"]; !cmp.Equal(got, map[string]any{"diameter": int64(7), "shade": "grey"}) {
			t.Errorf("created at v2: spec %v, want v2's fields with v2's default", got)
		}
		old := must[*unstructured.Unstructured](t)(v1.Get(t.Context(), "both", metav1.GetOptions{}))
		if got := old.Object["spec"]; old.GetAPIVersion() != widgetVersion.String() || !cmp.Equal(got, map[string]any{"size": int64(7), "color": "grey"}) {
			t.Errorf("read at v1: %s spec %v", old.GetAPIVersion(), got)
		}
		old.Object["spec"].(map[string]any)["color"] = "blue"
		must[*unstructured.Unstructured](t)(v1.Update(t.Context(), old, metav1.UpdateOptions{}))
		l := must[*unstructured.UnstructuredList](t)(v2.List(t.Context(), metav1.ListOptions{FieldSelector: "spec.shade=blue"}))
		if len(l.Items) != 1 || l.Items[0].Object["spec"].(map[string]any)["shade"] != "blue" {
			t.Errorf("v2 list by spec.shade: %v", l.Items)
		}
		if _, err := v2.List(t.Context(), metav1.ListOptions{FieldSelector: "spec.color=blue"}); !apierrors.IsBadRequest(err) {
			t.Errorf("v2 list by v1's field label: %v, want 400", err)
		}
		// Server-side apply at v2 over an object last written at v1.
		apply := []byte(`{"apiVersion":"test.leasehold.dev/v2","kind":"Widget","metadata":{"name":"both"},"spec":{"diameter":9}}`)
		_, err := v2.Patch(t.Context(), "both", "application/apply-patch+yaml", apply, metav1.PatchOptions{FieldManager: "applier"})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), ".spec.diameter") {
			t.Errorf("apply of a field another manager set at v1: %v, want a conflict on .spec.diameter", err)
		}
		applied := must[*unstructured.Unstructured](t)(v2.Patch(t.Context(), "both", "application/apply-patch+yaml", apply, metav1.PatchOptions{FieldManager: "applier", Force: ptr(true)}))
		if applied.Object["spec"].(map[string]any)["diameter"] != int64(9) {
			t.Errorf("apply at v2: %v", applied.Object["spec"])
		}
	})
}

// rbacRoleFixture is the suite's fixture of Roles and ClusterRoles: a
// rule on leases whose verbs change.
func rbacRoleFixture(res resources.Resource) kindtest.Fixture {
	return kindtest.Fixture{
		Resource: res,
		Content: func() map[string]any {
			return map[string]any{"rules": []any{map[string]any{
				"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"get"},
			}}}
		},
		Change: func(obj map[string]any) {
			rule := obj["rules"].([]any)[0].(map[string]any)
			rule["resourceNames"] = []any{"lease-" + nextChange()}
		},
		Invalid:      func(obj map[string]any) { obj["rules"].([]any)[0].(map[string]any)["verbs"] = []any{} },
		InvalidField: "rules[0].verbs",
		InvalidName:  "a%b",
	}
}

// rbacBindingFixture is the suite's fixture of RoleBindings and
// ClusterRoleBindings (whose roleRef cannot change): the subjects change.
func rbacBindingFixture(res resources.Resource, roleKind string) kindtest.Fixture {
	return kindtest.Fixture{
		Resource: res,
		Content: func() map[string]any {
			return map[string]any{
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": roleKind, "name": "view"},
				"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}},
			}
		},
		Change: func(obj map[string]any) {
			obj["subjects"].([]any)[0].(map[string]any)["name"] = "user-" + nextChange()
		},
		Invalid:      func(obj map[string]any) { obj["subjects"].([]any)[0].(map[string]any)["kind"] = "Robot" },
		InvalidField: "subjects[0].kind",
		InvalidName:  "a%b",
	}
}

// candidateFixture is the suite's LeaseCandidate at res's version. Its
// strategy is a third party's, so the coordinated election controller
// only creates the Lease it names and never pings the suite's candidates.
func candidateFixture(res resources.Resource) kindtest.Fixture {
	return kindtest.Fixture{
		Resource: res,
		Content: func() map[string]any {
			return map[string]any{"spec": map[string]any{
				"leaseName": "kindtest", "binaryVersion": "1.36.0", "emulationVersion": "1.35.0",
				"strategy":  "example.com/kindtest",
				"renewTime": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
			}}
		},
		Change:       annotate,
		Invalid:      func(obj map[string]any) { obj["spec"].(map[string]any)["binaryVersion"] = "v1" },
		InvalidField: "spec.binaryVersion",
	}
}
