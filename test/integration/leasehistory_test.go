package integration

import (
	"encoding/json"
	"net/http"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/controllers/leasemetrics"
	"github.com/leasehold/leasehold/internal/httpserver"
)

// TestLeaseHistory: /leasehold/v1/leasehistory lists a lease's holders
// as they change, to whoever may list the leases it covers (a RoleBinding
// in one namespace is enough there), and refuses others as the list would.
func TestLeaseHistory(t *testing.T) {
	t.Parallel()
	s := startWithUsers(t, "")
	admin := s.Client(t)
	ctx := t.Context()
	secNamespaces(t, admin, "team-a")
	must[any](t)(admin.RbacV1().Roles("team-a").Create(ctx, role("team-a", "lease-reader", leaseRule([]string{"get", "list", "watch"})), metav1.CreateOptions{}))
	must[any](t)(admin.RbacV1().RoleBindings("team-a").Create(ctx, roleBinding("team-a", "alice-reads", "Role", "lease-reader", userSubject("alice")), metav1.CreateOptions{}))
	alice := s.tokenConfig("alice-token")
	waitAllowed(t, secClient(t, alice), &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "list", Group: "coordination.k8s.io", Resource: "leases"})

	now := metav1.NowMicro()
	l := must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("team-a").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("alpha"), LeaseDurationSeconds: ptr[int32](15), RenewTime: &now, AcquireTime: &now},
	}, metav1.CreateOptions{}))
	later := metav1.NewMicroTime(now.Add(20e9))
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = ptr("beta"), &later, &later
	must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("team-a").Update(ctx, l, metav1.UpdateOptions{}))

	path := httpserver.LeaseHistoryPath + "?namespace=team-a"
	var got leasemetrics.HistoryList
	waitFor(t, func() bool {
		r := doAs(t, alice, s.URL(), http.MethodGet, path, nil, nil)
		if r.code != http.StatusOK {
			t.Fatalf("GET %s as alice: %d %s", path, r.code, r.body)
		}
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
		return len(got.Leases) == 1 && len(got.Leases[0].Holders) == 2
	})
	h := got.Leases[0]
	if h.Name != "leader" || h.Holders[0].Holder != "alpha" || h.Holders[1].Holder != "beta" || h.Holders[1].GapSeconds != 20 {
		t.Errorf("history %+v", h)
	}
	if got.Depth != 10 || got.MaxLeases != 4096 || got.Since.IsZero() {
		t.Errorf("bounds: depth %d, max leases %d, since %v", got.Depth, got.MaxLeases, got.Since)
	}

	// The whole cluster's histories need a cluster-wide list; bob has no
	// rights at all; only GET is served.
	wantRawStatus(t, doAs(t, alice, s.URL(), http.MethodGet, httpserver.LeaseHistoryPath, nil, nil), http.StatusForbidden, "Forbidden",
		`leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope`)
	wantRawStatus(t, doAs(t, s.tokenConfig("bob-token"), s.URL(), http.MethodGet, path, nil, nil), http.StatusForbidden, "Forbidden",
		`leases.coordination.k8s.io is forbidden: User "bob" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "team-a"`)
	wantRawStatus(t, doAs(t, s.Config, s.URL(), http.MethodPost, path, nil, nil), http.StatusMethodNotAllowed, "MethodNotAllowed", "")
}
