package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/electiontest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestCoordinatedLeaderElection: client-go candidates with coordinated
// leader election (LeaseCandidate, and leaderelection with Coordinated)
// end with the holder the server picks, hand over within the bounds
// derived in electiontest, and never have two holders at once, also
// when a preferred holder goes away (see electiontest).
func TestCoordinatedLeaderElection(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	env := electiontest.Env{
		Client: func(int) kubernetes.Interface { return s.ProtoClient(t) },
		Slack:  time.Second,
	}
	t.Run("handovers", func(t *testing.T) {
		t.Parallel()
		env := env
		env.Namespace = "cle-handovers"
		electiontest.Handovers(t, env)
	})
	t.Run("preferred holder gone", func(t *testing.T) {
		t.Parallel()
		env := env
		env.Namespace = "cle-stall"
		electiontest.PreferredHolderGone(t, env)
	})
}

// TestLeaseCandidates: coordination.k8s.io serves v1 leases beside
// v1beta1 and v1alpha2 leasecandidates, with v1 still preferred; one
// object reads the same at both versions, in JSON and protobuf; and
// spec.leaseName selects. Without --coordinated-leader-election nothing
// of it is served.
func TestLeaseCandidates(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	groupVersions := func(t *testing.T, s *testserver.Server) (map[string][]string, string) {
		t.Helper()
		dc := discovery.NewDiscoveryClientForConfigOrDie(s.Config)
		groups, resources, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		var preferred string
		for _, g := range groups {
			if g.Name == "coordination.k8s.io" {
				preferred = g.PreferredVersion.GroupVersion
			}
		}
		byGV := map[string][]string{}
		for _, l := range resources {
			for _, r := range l.APIResources {
				byGV[l.GroupVersion] = append(byGV[l.GroupVersion], r.Name)
				if r.Name == "leasecandidates" {
					if r.Kind != "LeaseCandidate" || !r.Namespaced || r.SingularName != "leasecandidate" || !slices.Equal(r.Verbs, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}) {
						t.Errorf("%s leasecandidates: %+v", l.GroupVersion, r)
					}
				}
			}
		}
		return byGV, preferred
	}
	byGV, preferred := groupVersions(t, s)
	want := map[string][]string{"coordination.k8s.io/v1": {"leases"}, "coordination.k8s.io/v1beta1": {"leasecandidates"}, "coordination.k8s.io/v1alpha2": {"leasecandidates"}}
	for gv, names := range want {
		if !slices.Equal(byGV[gv], names) {
			t.Errorf("%s serves %q, want %q", gv, byGV[gv], names)
		}
	}
	if preferred != "coordination.k8s.io/v1" {
		t.Errorf("coordination.k8s.io prefers %s, want v1", preferred)
	}
	// The legacy group document lists the versions by priority; each
	// version's resource list has the storage version's hash.
	r := do(t, s, "GET", "/apis/coordination.k8s.io", nil, "")
	var g metav1.APIGroup
	mustUnmarshal(t, r.body, &g)
	var versions []string
	for _, v := range g.Versions {
		versions = append(versions, v.Version)
	}
	if !slices.Equal(versions, []string{"v1", "v1beta1", "v1alpha2"}) || g.PreferredVersion.Version != "v1" {
		t.Errorf("/apis/coordination.k8s.io: versions %q, preferred %q", versions, g.PreferredVersion.Version)
	}
	for _, v := range []string{"v1beta1", "v1alpha2"} {
		var l metav1.APIResourceList
		mustUnmarshal(t, do(t, s, "GET", "/apis/coordination.k8s.io/"+v, nil, "").body, &l)
		if len(l.APIResources) != 1 || l.APIResources[0].StorageVersionHash != "lvME0iHWE20=" {
			t.Errorf("/apis/coordination.k8s.io/%s: %+v", v, l.APIResources)
		}
	}

	// Written at v1alpha2 in JSON, read at v1beta1 in protobuf. No
	// renewTime: the election controller leaves the candidates alone.
	ctx := t.Context()
	alpha := s.Client(t).CoordinationV1alpha2().LeaseCandidates("default")
	beta := s.ProtoClient(t).CoordinationV1beta1().LeaseCandidates("default")
	w := must[watch.Interface](t)(beta.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.leaseName=one"}))
	defer w.Stop()
	for i, lease := range []string{"one", "two", "one"} {
		must[*coordinationv1alpha2.LeaseCandidate](t)(alpha.Create(ctx, &coordinationv1alpha2.LeaseCandidate{
			ObjectMeta: metav1.ObjectMeta{Name: "Node_" + string(rune('A'+i))},
			Spec: coordinationv1alpha2.LeaseCandidateSpec{
				LeaseName: lease, BinaryVersion: "1.36.0", EmulationVersion: "1.35.0", Strategy: coordinationv1.OldestEmulationVersion,
				PingTime: &metav1.MicroTime{Time: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)},
			},
		}, metav1.CreateOptions{}))
	}
	got := must[*coordinationv1beta1.LeaseCandidate](t)(beta.Get(ctx, "Node_A", metav1.GetOptions{}))
	wantSpec := coordinationv1beta1.LeaseCandidateSpec{
		LeaseName: "one", BinaryVersion: "1.36.0", EmulationVersion: "1.35.0", Strategy: coordinationv1.OldestEmulationVersion,
		PingTime: &metav1.MicroTime{Time: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)},
	}
	if diff := cmp.Diff(wantSpec, got.Spec); diff != "" {
		t.Errorf("read at v1beta1 (-want +got):\n%s", diff)
	}
	list := must[*coordinationv1beta1.LeaseCandidateList](t)(beta.List(ctx, metav1.ListOptions{FieldSelector: "spec.leaseName=one"}))
	var names []string
	for _, c := range list.Items {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"Node_A", "Node_C"}) {
		t.Errorf("spec.leaseName=one lists %q", names)
	}
	for _, wantName := range []string{"Node_A", "Node_C"} {
		ev := <-w.ResultChan()
		if c, ok := ev.Object.(*coordinationv1beta1.LeaseCandidate); !ok || ev.Type != watch.Added || c.Name != wantName {
			t.Errorf("watch spec.leaseName=one: %s %v, want ADDED %s", ev.Type, ev.Object, wantName)
		}
	}
	// leaseName is immutable.
	got.Spec.LeaseName = "two"
	if _, err := beta.Update(ctx, got, metav1.UpdateOptions{}); err == nil || !contains(err.Error(), "spec.leaseName: Invalid value: \"two\": field is immutable") {
		t.Errorf("changing leaseName: %v", err)
	}

	t.Run("without coordinated leader election", func(t *testing.T) {
		t.Parallel()
		off := testserver.Start(t, func(c *server.Config) { c.CoordinatedLeaderElection = false })
		byGV, preferred := groupVersions(t, off)
		for gv := range byGV {
			if gv != "v1" && gv != "coordination.k8s.io/v1" && gv != "discovery.k8s.io/v1" && gv != "events.k8s.io/v1" && gv != "authentication.k8s.io/v1" && gv != "authorization.k8s.io/v1" && gv != "rbac.authorization.k8s.io/v1" {
				t.Errorf("serves %s: %q", gv, byGV[gv])
			}
		}
		if preferred != "coordination.k8s.io/v1" {
			t.Errorf("coordination.k8s.io prefers %s", preferred)
		}
		if r := do(t, off, "GET", "/apis/coordination.k8s.io/v1beta1/namespaces/default/leasecandidates", nil, ""); r.code != 404 {
			t.Errorf("leasecandidates without coordinated leader election: %d %s", r.code, r.body)
		}
	})
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

// TestElectionOfExistingLease: a Lease that existed before any candidate
// named it (the election controller holds only Leases with candidates)
// is still elected once a candidate comes, not created again.
func TestElectionOfExistingLease(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	cs := s.ProtoClient(t)
	leases := cs.CoordinationV1().Leases("default")
	must[*coordinationv1.Lease](t)(leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}))
	// Renewed a few times, so that the controller has seen it go by.
	for i := range 3 {
		l := must[*coordinationv1.Lease](t)(leases.Get(ctx, "before", metav1.GetOptions{}))
		l.Labels = map[string]string{"round": strconv.Itoa(i)}
		must[*coordinationv1.Lease](t)(leases.Update(ctx, l, metav1.UpdateOptions{}))
		time.Sleep(100 * time.Millisecond)
	}
	now := metav1.NowMicro()
	must[*coordinationv1beta1.LeaseCandidate](t)(cs.CoordinationV1beta1().LeaseCandidates("default").Create(ctx, &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: "only"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName: "before", BinaryVersion: "1.36.0", EmulationVersion: "1.36.0", Strategy: coordinationv1.OldestEmulationVersion,
			RenewTime: &now, PingTime: &now,
		},
	}, metav1.CreateOptions{}))
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := must[*coordinationv1.Lease](t)(leases.Get(ctx, "before", metav1.GetOptions{}))
		if h := l.Spec.HolderIdentity; h != nil && *h == "only" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the candidate was not elected: %+v", l.Spec)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
