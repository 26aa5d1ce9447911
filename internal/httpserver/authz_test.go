package httpserver

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/auth"
)

func TestParseRequest(t *testing.T) {
	type attrs struct {
		Resource                                        bool
		Verb, Group, Version, Namespace, Res, Sub, Name string
	}
	cases := []struct {
		method, url string
		want        attrs
	}{
		// kube-apiserver's requestinfo_test cases that apply here.
		{"GET", "/api/v1/namespaces", attrs{true, "list", "", "v1", "", "namespaces", "", ""}},
		{"GET", "/api/v1/namespaces/other", attrs{true, "get", "", "v1", "other", "namespaces", "", "other"}},
		{"GET", "/api/v1/namespaces/other/endpoints", attrs{true, "list", "", "v1", "other", "endpoints", "", ""}},
		{"HEAD", "/api/v1/namespaces/other/endpoints/foo", attrs{true, "get", "", "v1", "other", "endpoints", "", "foo"}},
		{"GET", "/api/v1/endpoints", attrs{true, "list", "", "v1", "", "endpoints", "", ""}},
		{"GET", "/api/v1/watch/endpoints", attrs{true, "watch", "", "v1", "", "endpoints", "", ""}},
		{"GET", "/api/v1/endpoints?watch=true", attrs{true, "watch", "", "v1", "", "endpoints", "", ""}},
		{"GET", "/api/v1/endpoints?watch=false", attrs{true, "list", "", "v1", "", "endpoints", "", ""}},
		{"GET", "/api/v1/watch/namespaces/other/endpoints/x", attrs{true, "watch", "", "v1", "other", "endpoints", "", "x"}},
		{"GET", "/api/v1/namespaces/other/endpoints?watch=1", attrs{true, "watch", "", "v1", "other", "endpoints", "", ""}},
		{"GET", "/api/v1/namespaces/other/endpoints?watch=1&labelSelector=%21%21", attrs{true, "watch", "", "v1", "other", "endpoints", "", ""}},
		{"PUT", "/api/v1/namespaces/other/finalize", attrs{true, "update", "", "v1", "other", "namespaces", "finalize", "other"}},
		{"PUT", "/api/v1/namespaces/other/status", attrs{true, "update", "", "v1", "other", "namespaces", "status", "other"}},
		{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/a/leases/x", attrs{true, "patch", "coordination.k8s.io", "v1", "a", "leases", "", "x"}},
		{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/a/leases/x", attrs{true, "delete", "coordination.k8s.io", "v1", "a", "leases", "", "x"}},
		{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/a/leases", attrs{true, "deletecollection", "coordination.k8s.io", "v1", "a", "leases", "", ""}},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/a/leases", attrs{true, "create", "coordination.k8s.io", "v1", "a", "leases", "", ""}},
		{"POST", "/api/v1/namespaces", attrs{true, "create", "", "v1", "", "namespaces", "", ""}},
		// A list for one name is authorized with the name.
		{"GET", "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3Dx", attrs{true, "list", "coordination.k8s.io", "v1", "", "leases", "", "x"}},
		{"GET", "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3D..", attrs{true, "list", "coordination.k8s.io", "v1", "", "leases", "", ""}},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", attrs{true, "create", "authorization.k8s.io", "v1", "", "selfsubjectaccessreviews", "", ""}},
		// Non-resource requests.
		{"GET", "/api", attrs{Verb: "get"}},
		{"GET", "/api/v1", attrs{Verb: "get"}},
		{"GET", "/apis/coordination.k8s.io", attrs{Verb: "get"}},
		{"GET", "/apis/coordination.k8s.io/v1", attrs{Verb: "get"}},
		{"GET", "/openapi/v3/apis/coordination.k8s.io/v1", attrs{Verb: "get"}},
		{"POST", "/debug/pprof/profile", attrs{Verb: "post"}},
		{"HEAD", "/", attrs{Verb: "head"}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			a := parseRequest(httptest.NewRequest(tc.method, tc.url, nil)).attrs
			got := attrs{a.ResourceRequest, a.Verb, a.APIGroup, a.APIVersion, a.Namespace, a.Resource, a.Subresource, a.Name}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestForbiddenMessage(t *testing.T) {
	u := auth.User{Name: "u"}
	cases := []struct {
		attrs  auth.Attributes
		reason string
		want   string
	}{
		{auth.Attributes{User: u, Verb: "get", ResourceRequest: true, APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "ns", Name: "x"}, "",
			`leases.coordination.k8s.io "x" is forbidden: User "u" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "ns"`},
		{auth.Attributes{User: u, Verb: "list", ResourceRequest: true, APIGroup: "coordination.k8s.io", Resource: "leases"}, "No policy matched.",
			`leases.coordination.k8s.io is forbidden: User "u" cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope: No policy matched.`},
		{auth.Attributes{User: u, Verb: "update", ResourceRequest: true, Resource: "namespaces", Subresource: "status", Namespace: "a", Name: "a"}, "No policy matched.",
			`namespaces "a" is forbidden: User "u" cannot update resource "namespaces/status" in API group "" in the namespace "a": No policy matched.`},
		{auth.Attributes{User: u, Verb: "get", Path: "/p"}, "",
			`forbidden: User "u" cannot get path "/p"`},
		{auth.Attributes{User: auth.User{Name: "<b>"}, Verb: "get", Path: "/a&b"}, "x",
			`forbidden: User "&lt;b&gt;" cannot get path "/a&amp;b": x`},
	}
	for _, tc := range cases {
		se := forbidden(tc.attrs, tc.reason).(interface{ Error() string })
		if se.Error() != tc.want {
			t.Errorf("got  %s\nwant %s", se.Error(), tc.want)
		}
	}
}

// verbAuthorizer allows a user the verbs listed for it on every resource,
// as an RBAC role could, and everything to "admin"; ABAC cannot tell
// update from create, so this is the authorizer that shows the
// create-on-update check.
type verbAuthorizer map[string][]string

func (v verbAuthorizer) Authorize(a auth.Attributes) (auth.Decision, string) {
	if a.User.Name == "admin" || slices.Contains(v[a.User.Name], a.Verb) {
		return auth.DecisionAllow, ""
	}
	return auth.DecisionNoOpinion, "not allowed"
}

func (v verbAuthorizer) RulesFor(auth.User, string) (auth.Rules, error) { return auth.Rules{}, nil }

func TestCreateOnUpdateNeedsCreate(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("admin-token,admin,1\nupdater-token,updater,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := auth.NewTokenFile(tokens, auth.Reload{})
	if err != nil {
		t.Fatal(err)
	}
	p := newInProcess(t, func(c *Config) {
		c.Authenticator = auth.NewAuthenticator(auth.AuthenticatorConfig{Tokens: tf})
		c.Authorizer = verbAuthorizer{"updater": {"get", "update", "patch"}}
	})
	do := func(token, method, path, contentType, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if body != "" {
			req = httptest.NewRequest(method, path, stringsReader(body))
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		p.srv.ServeHTTP(w, req)
		return w
	}
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	lease := func(name string) string {
		return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `"},"spec":{"holderIdentity":"a"}}`
	}
	if w := do("admin-token", "POST", leases, "application/json", lease("present")); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	// Writes to a present object need only their own verb.
	if w := do("updater-token", "PATCH", leases+"/present", "application/merge-patch+json", `{"spec":{"holderIdentity":"b"}}`); w.Code != http.StatusOK {
		t.Fatalf("patch of a present lease: %d %s", w.Code, w.Body)
	}
	w := do("updater-token", "PUT", leases+"/missing", "application/json", lease("missing"))
	want := `leases.coordination.k8s.io "missing" is forbidden: User "updater" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "default": not allowed`
	if w.Code != http.StatusForbidden || statusOf(t, w).Message != want {
		t.Fatalf("PUT that creates: %d %s", w.Code, w.Body)
	}
	w = do("updater-token", "PATCH", leases+"/missing?fieldManager=m", "application/apply-patch+yaml", lease("missing"))
	if w.Code != http.StatusForbidden || statusOf(t, w).Message != want {
		t.Fatalf("apply that creates: %d %s", w.Code, w.Body)
	}
	if w := do("updater-token", "PATCH", leases+"/present?fieldManager=m&force=true", "application/apply-patch+yaml", lease("present")); w.Code != http.StatusOK {
		t.Fatalf("apply to a present lease: %d %s", w.Code, w.Body)
	}
	const eps = "/api/v1/namespaces/default/endpoints"
	ep := `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"e"}}`
	if w := do("updater-token", "PUT", eps+"/e", "application/json", ep); w.Code != http.StatusForbidden {
		t.Fatalf("PUT that creates Endpoints: %d %s", w.Code, w.Body)
	}
	if w := do("admin-token", "PUT", eps+"/e", "application/json", ep); w.Code != http.StatusCreated {
		t.Fatalf("admin PUT that creates: %d %s", w.Code, w.Body)
	}
	if w := do("updater-token", "PUT", eps+"/e", "application/json", ep); w.Code != http.StatusOK {
		t.Fatalf("PUT that updates: %d %s", w.Code, w.Body)
	}
	// Without credentials: 401; with a bad token: 401.
	if w := do("nope", "GET", leases, "", ""); w.Code != http.StatusUnauthorized || statusOf(t, w).Message != "Unauthorized" {
		t.Fatalf("bad token: %d %s", w.Code, w.Body)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
