package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/server"
)

// auditPolicy records the leases of namespace "watched" with their
// bodies, and every other request's metadata.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
  namespaces: ["watched"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: Metadata
`

// readAudit parses every event of the audit log, failing on a line that
// is not an audit.k8s.io/v1 Event.
func readAudit(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []auditv1.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var ev auditv1.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" {
			t.Fatalf("line %q: kind %q apiVersion %q", sc.Text(), ev.Kind, ev.APIVersion)
		}
		events = append(events, ev)
	}
	return events
}

// findEvent returns the events of a stage that match.
func findEvents(events []auditv1.Event, stage auditv1.Stage, match func(ev *auditv1.Event) bool) []auditv1.Event {
	var out []auditv1.Event
	for i := range events {
		if events[i].Stage == stage && match(&events[i]) {
			out = append(out, events[i])
		}
	}
	return out
}

// TestAuditLog: the audit log records, in kube-apiserver's format, who
// renewed a lease, who took it over, who tried to delete it and who did,
// with the verb, the object and the response code; a lease under a
// RequestResponse rule with its bodies; impersonation and failed
// authentication as kube-apiserver records them.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath, policyPath := filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit-policy.yaml")
	writeTestFile(t, policyPath, auditPolicy)
	s := startWithUsers(t, "", func(c *server.Config) { c.AuditLogPath, c.AuditPolicyFile = logPath, policyPath })
	admin := s.Client(t)
	secNamespaces(t, admin, "apps", "watched")
	for _, ns := range []string{"apps", "watched"} {
		must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock"}}, metav1.CreateOptions{}))
		must[*rbacv1.Role](t)(admin.RbacV1().Roles(ns).Create(t.Context(), role(ns, "holder", leaseRule([]string{"get", "update"}, "lock")), metav1.CreateOptions{}))
		must[*rbacv1.RoleBinding](t)(admin.RbacV1().RoleBindings(ns).Create(t.Context(), roleBinding(ns, "holder", "Role", "holder", userSubject("alice"), userSubject("bob")), metav1.CreateOptions{}))
	}
	alice, bob := secClient(t, s.tokenConfig("alice-token")), secClient(t, s.tokenConfig("bob-token"))
	for _, ns := range []string{"apps", "watched"} {
		waitAllowed(t, bob, &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "lock"})
	}

	hold := func(c kubernetes.Interface, ns, who string) *coordinationv1.Lease {
		t.Helper()
		l := must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Get(t.Context(), "lock", metav1.GetOptions{}))
		l.Spec.HolderIdentity = ptr(who)
		now := metav1.NowMicro()
		l.Spec.RenewTime = &now
		return must[*coordinationv1.Lease](t)(c.CoordinationV1().Leases(ns).Update(t.Context(), l, metav1.UpdateOptions{}))
	}
	for _, ns := range []string{"apps", "watched"} {
		hold(alice, ns, "alice")
		hold(alice, ns, "alice") // renews
		hold(bob, ns, "bob")     // takes it over
		if ns == "watched" {
			// Lists, recorded with their bodies in JSON whatever they
			// were answered in.
			asJSON := rest.CopyConfig(s.Config)
			asJSON.ContentType, asJSON.AcceptContentTypes = "application/json", "application/json"
			for _, c := range []kubernetes.Interface{secClient(t, asJSON), s.ProtoClient(t)} {
				must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{}))
			}
		}
		if err := alice.CoordinationV1().Leases(ns).Delete(t.Context(), "lock", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice deletes: %v", err)
		}
		if err := admin.CoordinationV1().Leases(ns).Delete(t.Context(), "lock", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Impersonation and a failed authentication.
	asBob := rest.CopyConfig(s.Config)
	asBob.Impersonate.UserName = "bob"
	if _, err := secClient(t, asBob).CoordinationV1().Leases("apps").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("admin as bob lists: %v", err)
	}
	doAs(t, s.tokenConfig("nope"), s.URL(), "GET", "/apis/coordination.k8s.io/v1/namespaces/apps/leases/lock", nil, nil)

	s.Stop() // every event is written
	events := readAudit(t, logPath)
	lock := func(ns, verb, user string, code int32) func(ev *auditv1.Event) bool {
		return func(ev *auditv1.Event) bool {
			r := ev.ObjectRef
			return ev.Verb == verb && ev.User.Username == user && r != nil && r.Resource == "leases" && r.APIGroup == "coordination.k8s.io" &&
				r.APIVersion == "v1" && r.Namespace == ns && r.Name == "lock" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == code
		}
	}
	one := func(what string, evs []auditv1.Event, n int) []auditv1.Event {
		t.Helper()
		if len(evs) != n {
			t.Fatalf("%s: %d events, want %d", what, len(evs), n)
		}
		return evs
	}
	for _, ns := range []string{"apps", "watched"} {
		renews := one("alice's renewals in "+ns, findEvents(events, auditv1.StageResponseComplete, lock(ns, "update", "alice", 200)), 2)
		takeover := one("bob's takeover in "+ns, findEvents(events, auditv1.StageResponseComplete, lock(ns, "update", "bob", 200)), 1)[0]
		refused := one("alice's delete in "+ns, findEvents(events, auditv1.StageResponseComplete, lock(ns, "delete", "alice", 403)), 1)[0]
		deleted := one("the admin's delete in "+ns, findEvents(events, auditv1.StageResponseComplete, lock(ns, "delete", "leasehold-admin", 200)), 1)[0]

		want := `RBAC: allowed by RoleBinding "holder/` + ns + `" of Role "holder" to User "bob"`
		if a := takeover.Annotations; a["authorization.k8s.io/decision"] != "allow" || a["authorization.k8s.io/reason"] != want {
			t.Errorf("takeover annotations %v", a)
		}
		if a := refused.Annotations; a["authorization.k8s.io/decision"] != "forbid" || refused.ResponseStatus.Reason != metav1.StatusReasonForbidden ||
			!strings.Contains(refused.ResponseStatus.Message, `User "alice" cannot delete resource "leases"`) {
			t.Errorf("refused delete: %+v %+v", a, refused.ResponseStatus)
		}
		if st := deleted.ResponseStatus; st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "lock" {
			t.Errorf("delete status %+v", st)
		}
		// Each request has a RequestReceived event of the same audit ID;
		// the update's object reference gains the request's uid and
		// resourceVersion.
		for _, ev := range append(renews, takeover, refused, deleted) {
			if len(findEvents(events, auditv1.StageRequestReceived, func(r *auditv1.Event) bool { return r.AuditID == ev.AuditID })) != 1 {
				t.Errorf("no RequestReceived event for %s", ev.AuditID)
			}
			if ev.SourceIPs[0] != "127.0.0.1" || ev.UserAgent == "" || ev.RequestReceivedTimestamp.IsZero() || ev.StageTimestamp.Before(&ev.RequestReceivedTimestamp) {
				t.Errorf("event %+v", ev)
			}
		}
		if takeover.ObjectRef.UID == "" || takeover.ObjectRef.ResourceVersion == "" {
			t.Errorf("takeover object %+v", takeover.ObjectRef)
		}
		// The levels: bodies in "watched" only.
		if ns == "apps" {
			if takeover.Level != auditv1.LevelMetadata || takeover.RequestObject != nil || takeover.ResponseObject != nil {
				t.Errorf("apps: level %s with bodies", takeover.Level)
			}
			continue
		}
		if takeover.Level != auditv1.LevelRequestResponse {
			t.Fatalf("watched: level %s", takeover.Level)
		}
		var sent, answered coordinationv1.Lease
		if err := json.Unmarshal(takeover.RequestObject.Raw, &sent); err != nil || sent.Spec.HolderIdentity == nil || *sent.Spec.HolderIdentity != "bob" {
			t.Errorf("request object %s: %v", takeover.RequestObject.Raw, err)
		}
		if err := json.Unmarshal(takeover.ResponseObject.Raw, &answered); err != nil || answered.Kind != "Lease" || answered.ResourceVersion == sent.ResourceVersion {
			t.Errorf("response object %s: %v", takeover.ResponseObject.Raw, err)
		}
	}
	lists := one("the admin's lists in watched", findEvents(events, auditv1.StageResponseComplete, func(ev *auditv1.Event) bool {
		return ev.Verb == "list" && ev.User.Username == "leasehold-admin" && ev.ObjectRef != nil && ev.ObjectRef.Namespace == "watched"
	}), 2)
	for _, ev := range lists {
		var l coordinationv1.LeaseList
		if ev.Level != auditv1.LevelRequestResponse || ev.ResponseObject == nil || json.Unmarshal(ev.ResponseObject.Raw, &l) != nil ||
			l.Kind != "LeaseList" || len(l.Items) != 1 || l.Items[0].Spec.HolderIdentity == nil || *l.Items[0].Spec.HolderIdentity != "bob" {
			t.Errorf("list event at %s: response object %s", ev.Level, ev.ResponseObject)
		}
	}
	// The admin acting as bob: both users, the constraint of the mode.
	imp := findEvents(events, auditv1.StageResponseComplete, func(ev *auditv1.Event) bool { return ev.ImpersonatedUser != nil })
	if len(imp) != 1 || imp[0].User.Username != "leasehold-admin" || imp[0].ImpersonatedUser.Username != "bob" || imp[0].ResponseStatus.Code != http.StatusForbidden ||
		imp[0].AuthenticationMetadata == nil || imp[0].AuthenticationMetadata.ImpersonationConstraint != "impersonate:user-info" {
		t.Errorf("impersonation events %+v", imp)
	}
	// A failed authentication: one event, at ResponseStarted, no user.
	failed := findEvents(events, auditv1.StageResponseStarted, func(ev *auditv1.Event) bool { return ev.ResponseStatus != nil && ev.ResponseStatus.Code == 401 })
	if len(failed) != 1 || failed[0].User.Username != "" || failed[0].ResponseStatus.Message != "Unauthorized" || failed[0].ObjectRef == nil || failed[0].ObjectRef.Name != "lock" {
		t.Errorf("401 events %+v", failed)
	}
}
