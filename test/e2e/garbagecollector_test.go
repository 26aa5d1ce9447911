package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestKubectlCascade: kubectl delete --cascade=background|foreground|
// orphan, on each engine, with Leases and Endpoints owned by a Lease.
// kubectl waits for the owner to go; by then a foreground delete has
// removed every dependent, an orphaning one has removed the owner's
// references from them, and a background one leaves them to the
// garbage collector, which deletes them soon after.
func TestKubectlCascade(t *testing.T) {
	t.Parallel()
	engines := map[string]func(t *testing.T) *testserver.Server{
		"embedded": func(t *testing.T) *testserver.Server { return testserver.Start(t) },
		"etcd": func(t *testing.T) *testserver.Server {
			c, err := etcdtest.Shared()
			if err != nil {
				t.Fatal(err)
			}
			return testserver.Start(t, testserver.Etcd(c.Endpoints(), "/e2e-gc-"+uuid.NewString()))
		},
	}
	for engine, start := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			k := newKubectl(t, start(t))
			k.ok("", "create", "namespace", "gc")
			for _, cascade := range []string{"background", "foreground", "orphan"} {
				owner := "owner-" + cascade
				k.ok(fmt.Sprintf("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: %s, namespace: gc}\n", owner), "apply", "-f", "-")
				uid := strings.TrimSpace(k.ok("", "get", "lease", "-n", "gc", owner, "-o", "jsonpath={.metadata.uid}"))
				refs := fmt.Sprintf("ownerReferences: [{apiVersion: coordination.k8s.io/v1, kind: Lease, name: %s, uid: %s, blockOwnerDeletion: true}]", owner, uid)
				deps := fmt.Sprintf("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: dep-%s, namespace: gc, %s}\n---\n"+
					"apiVersion: v1\nkind: Endpoints\nmetadata: {name: dep-%s, namespace: gc, %s}\n", cascade, refs, cascade, refs)
				k.ok(deps, "apply", "-f", "-")

				out := k.ok("", "delete", "lease", "-n", "gc", owner, "--cascade="+cascade)
				if want := fmt.Sprintf("lease.coordination.k8s.io %q deleted", owner); !strings.Contains(out, want) {
					t.Errorf("--cascade=%s: %q, want %q", cascade, out, want)
				}
				k.fails("", "get", "lease", "-n", "gc", owner)
				dependents := func() []string {
					out := k.ok("", "get", "leases,endpoints", "-n", "gc", "--field-selector", "metadata.name=dep-"+cascade, "-o", "json")
					var l struct {
						Items []struct {
							Metadata struct {
								OwnerReferences []json.RawMessage `json:"ownerReferences"`
							} `json:"metadata"`
						} `json:"items"`
					}
					if err := json.Unmarshal([]byte(out), &l); err != nil {
						t.Fatal(err)
					}
					var refs []string
					for _, it := range l.Items {
						refs = append(refs, fmt.Sprint(len(it.Metadata.OwnerReferences)))
					}
					return refs
				}
				switch cascade {
				case "foreground":
					if d := dependents(); len(d) != 0 {
						t.Errorf("--cascade=foreground: dependents left once the owner went: %v", d)
					}
				case "orphan":
					if d := dependents(); strings.Join(d, ",") != "0,0" {
						t.Errorf("--cascade=orphan: dependents' reference counts %v, want 0,0", d)
					}
				case "background":
					deadline := time.Now().Add(20 * time.Second)
					for len(dependents()) != 0 {
						if time.Now().After(deadline) {
							t.Fatalf("--cascade=background: dependents still there after 20 s")
						}
						time.Sleep(100 * time.Millisecond)
					}
				}
			}
		})
	}
}
