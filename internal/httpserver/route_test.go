package httpserver

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/auth"
)

// TestRouteMatchesAuthorization reads every path of up to four segments
// drawn from resource names, namespace words and path tricks, with every
// method and several spellings of ?watch: whatever the router serves must
// be what authorization allowed, up to kube-apiserver's two quirks (a
// namespace's own path is authorized in that namespace; a list or watch
// for one field-selected name is authorized with the name).
func TestRouteMatchesAuthorization(t *testing.T) {
	s := newInProcess(t, nil).srv
	segments := []string{"namespaces", "watch", "a", "leases", "endpoints", "status", "finalize", "", ".."}
	queries := []string{"", "?watch=true", "?watch=yes", "?watch=", "?watch=0", "?w%61tch=1", "?watch=false&watch=true", "?fieldSelector=metadata.name%3Da"}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
	var paths []string
	var grow func(p string, depth int)
	grow = func(p string, depth int) {
		paths = append(paths, p)
		if depth == 0 {
			return
		}
		for _, seg := range segments {
			grow(p+"/"+seg, depth-1)
		}
	}
	grow("/api/v1", 4)
	grow("/apis/coordination.k8s.io/v1", 4)
	checked, mismatches := 0, 0
	for _, p := range paths {
		for _, q := range queries {
			for _, m := range methods {
				if q != "" && m != "GET" {
					continue // only reads read ?watch
				}
				r := parseRequest(httptest.NewRequest(m, "http://x"+p+q, nil))
				if !r.attrs.ResourceRequest || !r.routable || r.attrs.Resource == "" {
					continue
				}
				res, ok := s.reg.Resource(r.gvr())
				if !ok || routeError(res, r) != nil {
					continue
				}
				checked++
				if a := r.attrs; !servesAuthorized(r) {
					if mismatches++; mismatches <= 20 {
						t.Errorf("%s %s%s: authorized %s %s/%s/%s/%s, routed %s/%s/%s", m, p, q,
							a.Verb, a.Resource, a.Namespace, a.Name, a.Subresource, r.namespace(), r.name(), a.Subresource)
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d routed requests checked", checked)
	}
}

// servesAuthorized reports whether the route of r serves the namespace and
// name authorization saw.
func servesAuthorized(call *request) bool {
	a := call.attrs
	ns := call.namespace()
	if a.Resource == "namespaces" && !call.scoped {
		ns = call.name() // a namespace is its own namespace
	}
	sameName := a.Name == call.name() || call.name() == "" && (a.Verb == "list" || a.Verb == "watch")
	return a.Namespace == ns && sameName
}

// TestAuthorizationCannotBeSidestepped replays the requests that once
// reached an object other than the one authorized: each is refused and
// changes nothing.
func TestAuthorizationCannotBeSidestepped(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "policy.jsonl")
	if err := os.WriteFile(tokens, []byte("admin-token,admin,1,system:masters\nalice-token,alice,2\nrita-token,rita,3,readers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte(`{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"readers","namespace":"*","resource":"*","apiGroup":"*","readonly":true}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := auth.NewTokenFile(tokens, auth.Reload{})
	if err != nil {
		t.Fatal(err)
	}
	pf, err := auth.NewPolicyFile(policy, auth.Reload{})
	if err != nil {
		t.Fatal(err)
	}
	p := newInProcess(t, func(c *Config) {
		c.Authenticator = auth.NewAuthenticator(auth.AuthenticatorConfig{Tokens: tf})
		c.Authorizer = auth.NewAuthorizer(auth.DefaultRules(), auth.ABAC(pf))
	})
	do := func(user, method, target, contentType, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+user+"-token")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		p.srv.ServeHTTP(w, req)
		return w
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if w := do("admin", "POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`); w.Code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", ns, w.Code, w.Body)
		}
	}
	before := p.revision(t)

	const merge = "application/merge-patch+json"
	finalize := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"x":"y"}},"spec":{"finalizers":[]}}`
	for _, tc := range []struct {
		user, method, target, contentType, body string
		want                                    int
	}{
		// A namespace named below another namespace: kube-apiserver has
		// no such route.
		{"alice", "GET", "/api/v1/namespaces/team-a/namespaces/team-b", "", "", http.StatusNotFound},
		{"alice", "DELETE", "/api/v1/namespaces/team-a/namespaces/team-b", "", "", http.StatusNotFound},
		{"alice", "PATCH", "/api/v1/namespaces/team-a/namespaces/team-b", merge, `{"metadata":{"labels":{"x":"y"}}}`, http.StatusNotFound},
		{"alice", "PATCH", "/api/v1/namespaces/team-a/namespaces/new?fieldManager=x", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"new"}}`, http.StatusNotFound},
		{"alice", "PUT", "/api/v1/namespaces/team-a/namespaces/team-b/finalize", "application/json", finalize, http.StatusNotFound},
		{"alice", "GET", "/api/v1/watch/namespaces/team-a/namespaces/team-b", "", "", http.StatusNotFound},
		// Writes under /watch/: authorized as a watch, so never served.
		{"rita", "PUT", "/api/v1/watch/namespaces/team-a/finalize", "application/json", finalize, http.StatusNotFound},
		{"rita", "PATCH", "/api/v1/watch/namespaces/team-a/status", merge, `{"status":{"phase":"Terminating"}}`, http.StatusNotFound},
		{"rita", "PATCH", "/api/v1/watch/namespaces/team-a", merge, `{"metadata":{"labels":{"x":"y"}}}`, http.StatusMethodNotAllowed},
		{"rita", "DELETE", "/apis/coordination.k8s.io/v1/watch/namespaces/team-a/leases", "", "", http.StatusMethodNotAllowed},
		// The same requests where they belong are refused by policy.
		{"alice", "DELETE", "/api/v1/namespaces/team-b", "", "", http.StatusForbidden},
		{"rita", "PUT", "/api/v1/namespaces/team-a/finalize", "application/json", finalize, http.StatusForbidden},
	} {
		if w := do(tc.user, tc.method, tc.target, tc.contentType, tc.body); w.Code != tc.want {
			t.Errorf("%s %s %s: %d %s, want %d", tc.user, tc.method, tc.target, w.Code, w.Body, tc.want)
		}
	}
	if after := p.revision(t); after != before {
		t.Errorf("the store changed: revision %d, then %d", before, after)
	}

	// Any ?watch value but 0 or false is a watch for authorization, the
	// limits and the router alike, as in kube-apiserver: served as a watch
	// stream, not as a list that escapes the list's limits.
	for _, q := range []string{"watch=yes", "watch=", "w%61tch=1"} {
		w := do("rita", "GET", "/apis/coordination.k8s.io/v1/leases?timeoutSeconds=1&"+q, "", "")
		if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"kind":"LeaseList"`) {
			t.Errorf("GET leases?%s: %d %s, want a watch stream", q, w.Code, w.Body)
		}
	}
	// A named GET is a get, whatever ?watch says.
	w := do("rita", "GET", "/api/v1/namespaces/team-a?watch=true", "", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"kind":"Namespace"`) {
		t.Errorf("GET namespaces/team-a?watch=true: %d %s, want the namespace", w.Code, w.Body)
	}
}
