package integration

import (
	"bytes"
	"net/http"
	"os"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestSnapshotAuthorization: GET /snapshot is served to system:masters
// and to users granted get on the non-resource URL /snapshot, as
// kube-apiserver guards /metrics; every other user is refused 403.
func TestSnapshotAuthorization(t *testing.T) {
	if os.Getenv(testserver.StorageEnv) == server.StorageEtcd {
		t.Skip("snapshots are the embedded store's")
	}
	s := startWithUsers(t, "")
	wantSnapshot := func(r rawResponse) {
		t.Helper()
		if r.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", httpserver.SnapshotPath, r.code, r.body)
		}
		if _, err := embedded.CheckSnapshot(bytes.NewReader(r.body)); err != nil {
			t.Fatalf("GET %s: %v", httpserver.SnapshotPath, err)
		}
	}
	wantSnapshot(doAs(t, s.tokenConfig("root-token"), s.URL(), http.MethodGet, httpserver.SnapshotPath, nil, nil))
	wantRawStatus(t, doAs(t, s.tokenConfig("alice-token"), s.URL(), http.MethodGet, httpserver.SnapshotPath, nil, nil), http.StatusForbidden, "Forbidden", "")
	wantRawStatus(t, doAs(t, s.anonymousConfig(), s.URL(), http.MethodGet, httpserver.SnapshotPath, nil, nil), http.StatusUnauthorized, "Unauthorized", "")

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "snapshot-saver"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{httpserver.SnapshotPath}, Verbs: []string{"get"}}},
	}
	if _, err := s.Client(t).RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "snapshot-saver"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}
	if _, err := s.Client(t).RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var r rawResponse
	waitFor(t, func() bool {
		r = doAs(t, s.tokenConfig("alice-token"), s.URL(), http.MethodGet, httpserver.SnapshotPath, nil, nil)
		return r.code != http.StatusForbidden
	})
	wantSnapshot(r)
	// The grant is get on that path only.
	wantRawStatus(t, doAs(t, s.tokenConfig("alice-token"), s.URL(), http.MethodPost, httpserver.SnapshotPath, nil, nil), http.StatusForbidden, "Forbidden", "")
	wantRawStatus(t, doAs(t, s.tokenConfig("bob-token"), s.URL(), http.MethodGet, httpserver.SnapshotPath, nil, nil), http.StatusForbidden, "Forbidden", "")
}
