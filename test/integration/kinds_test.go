package integration

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/kindtest"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/builtin"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testserver"
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
// and for Widget, a kind that exists only in this test: the server learns
// of it from its description alone.
func TestKinds(t *testing.T) {
	t.Parallel()
	kinds := append(builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true}), widgetKind())
	s := testserver.Start(t, func(c *server.Config) { c.Kinds = kinds })
	must[*corev1.Namespace](t)(s.Client(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kinds"}}, metav1.CreateOptions{}))
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
		"namespaces": {
			Resource:     storage(schema.GroupKind{Kind: "Namespace"}),
			Change:       annotate,
			Invalid:      func(obj map[string]any) { obj["metadata"].(map[string]any)["name"] = "not.a.label" },
			InvalidField: "metadata.name",
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
				f.Namespace = "kinds"
			}
			kindtest.Run(t, s, f)
		})
	}
}
