package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/server"
)

func secLease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("h")}}
}

// secNamespaces creates namespaces as the admin.
func secNamespaces(t *testing.T, c kubernetes.Interface, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuthentication401: requests without valid credentials get
// kube-apiserver's 401 "Unauthorized", through raw HTTP and client-go;
// the health and version endpoints stay readable.
func TestAuthentication401(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "")
	untrusted := s.anonymousConfig()
	untrusted.CertData, untrusted.KeyData = newTestCA(t, "untrusted").issueClient(t, "mallory", "system:masters")
	cases := map[string]*rest.Config{
		"no credentials":        s.anonymousConfig(),
		"unknown token":         s.tokenConfig("nope"),
		"untrusted certificate": untrusted,
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			r := doAs(t, cfg, s.URL(), "GET", "/api/v1/namespaces", nil, nil)
			wantRawStatus(t, r, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			_, err := secClient(t, cfg).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
			if !apierrors.IsUnauthorized(err) {
				t.Fatalf("client-go: %v", err)
			}
			// Discovery too.
			if r := doAs(t, cfg, s.URL(), "GET", "/apis", nil, nil); r.code != http.StatusUnauthorized {
				t.Errorf("/apis: %d", r.code)
			}
			for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
				if r := doAs(t, cfg, s.URL(), "GET", p, nil, nil); r.code != http.StatusOK {
					t.Errorf("%s: %d %s", p, r.code, r.body)
				}
			}
		})
	}
	// Go clients send no certificate the server's CA list does not name;
	// one sent anyway must verify.
	certPEM, keyPEM := newTestCA(t, "untrusted").issueClient(t, "mallory", "system:masters")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.Config.CAData)
	forced := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:              roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
	}}}
	resp, err := forced.Get(s.URL() + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("untrusted certificate sent anyway: %d", resp.StatusCode)
	}

	// A valid token and the admin certificate work.
	if _, err := secClient(t, s.tokenConfig("bob-token")).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("token: %v", err)
	}
	if _, err := s.Client(t).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("admin: %v", err)
	}
}

// TestAnonymous: with --anonymous-auth, requests without credentials are
// system:anonymous in system:unauthenticated and are authorized as such;
// a bad token is still a 401.
func TestAnonymous(t *testing.T) {
	t.Parallel()
	anonymous := func(c *server.Config) { c.AnonymousAuth = true }
	s := startSecure(t, testPolicy, anonymous)
	secNamespaces(t, s.Client(t), "public")
	if _, err := s.Client(t).CoordinationV1().Leases("public").Create(t.Context(), secLease("open"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	anon := secClient(t, s.anonymousConfig())
	if _, err := anon.CoordinationV1().Leases("public").Get(t.Context(), "open", metav1.GetOptions{}); err != nil {
		t.Errorf("anonymous read allowed by policy: %v", err)
	}
	_, err := anon.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	se := wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	if want := `leases.coordination.k8s.io is forbidden: User "system:anonymous" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "default": No policy matched.`; se.ErrStatus.Message != want {
		t.Errorf("message %q", se.ErrStatus.Message)
	}
	_, err = anon.CoordinationV1().Leases("public").Create(t.Context(), secLease("x"), metav1.CreateOptions{})
	wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden)
	// "*" in a policy means authenticated users: discovery is not for
	// anonymous ones, /version is.
	r := doAs(t, s.anonymousConfig(), s.URL(), "GET", "/api", nil, nil)
	wantRawStatus(t, r, http.StatusForbidden, "Forbidden", `forbidden: User "system:anonymous" cannot get path "/api": No policy matched.`)
	if r := doAs(t, s.anonymousConfig(), s.URL(), "GET", "/version", nil, nil); r.code != http.StatusOK {
		t.Errorf("/version: %d", r.code)
	}
	// An invalid token is refused, not taken as anonymous.
	r = doAs(t, s.tokenConfig("nope"), s.URL(), "GET", "/apis/coordination.k8s.io/v1/namespaces/public/leases/open", nil, nil)
	wantRawStatus(t, r, http.StatusUnauthorized, "Unauthorized", "Unauthorized")

	// Without a policy file, anonymous users get only health and version.
	s2 := startSecure(t, "", anonymous)
	r = doAs(t, s2.anonymousConfig(), s2.URL(), "GET", secLeasesPath, nil, nil)
	wantRawStatus(t, r, http.StatusForbidden, "Forbidden",
		`leases.coordination.k8s.io is forbidden: User "system:anonymous" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "default"`)
	if r := doAs(t, s2.tokenConfig("bob-token"), s2.URL(), "GET", secLeasesPath, nil, nil); r.code != http.StatusOK {
		t.Errorf("authenticated user without a policy file: %d %s", r.code, r.body)
	}
}

const secLeasesPath = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

// TestABAC checks the policy file's allow/deny matrix through client-go:
// namespace scoping, readonly, lists and watches across namespaces, and
// kube-apiserver's 403 messages.
func TestABAC(t *testing.T) {
	t.Parallel()
	s := startSecure(t, testPolicy)
	admin := s.Client(t)
	secNamespaces(t, admin, "team-a", "team-b")
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := admin.CoordinationV1().Leases(ns).Create(t.Context(), secLease("l"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alice := secClient(t, s.tokenConfig("alice-token"))
	bob := secClient(t, s.tokenConfig("bob-token"))
	wanda := secClient(t, s.tokenConfig("watcher-token"))
	root := secClient(t, s.tokenConfig("root-token"))
	ctx := t.Context()
	merge := []byte(`{"spec":{"holderIdentity":"x"}}`)

	type op func(c kubernetes.Interface, ns string) error
	ops := map[string]op{
		"get": func(c kubernetes.Interface, ns string) error {
			_, err := c.CoordinationV1().Leases(ns).Get(ctx, "l", metav1.GetOptions{})
			return err
		},
		"list": func(c kubernetes.Interface, ns string) error {
			_, err := c.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"watch": func(c kubernetes.Interface, ns string) error {
			w, err := c.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		},
		"create": func(c kubernetes.Interface, ns string) error {
			_, err := c.CoordinationV1().Leases(ns).Create(ctx, secLease("n"), metav1.CreateOptions{DryRun: []string{"All"}})
			return err
		},
		"update": func(c kubernetes.Interface, ns string) error {
			l, err := admin.CoordinationV1().Leases(ns).Get(ctx, "l", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{DryRun: []string{"All"}})
			return err
		},
		"patch": func(c kubernetes.Interface, ns string) error {
			_, err := c.CoordinationV1().Leases(ns).Patch(ctx, "l", types.MergePatchType, merge, metav1.PatchOptions{DryRun: []string{"All"}})
			return err
		},
		"delete": func(c kubernetes.Interface, ns string) error {
			return c.CoordinationV1().Leases(ns).Delete(ctx, "l", metav1.DeleteOptions{DryRun: []string{"All"}})
		},
		"deletecollection": func(c kubernetes.Interface, ns string) error {
			return c.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{"All"}}, metav1.ListOptions{})
		},
	}
	reads := []string{"get", "list", "watch"}
	writes := []string{"create", "update", "patch", "delete", "deletecollection"}
	all := append(slices.Clone(reads), writes...)
	cases := []struct {
		user   string
		c      kubernetes.Interface
		ns     string
		allow  []string
		denied []string
	}{
		{"alice", alice, "team-a", all, nil},
		{"alice", alice, "team-b", nil, all},
		{"alice", alice, "", nil, []string{"list", "watch"}},
		{"bob", bob, "team-a", reads, writes},
		{"bob", bob, "team-b", nil, all},
		{"wanda", wanda, "team-b", reads, writes},
		{"wanda", wanda, "", []string{"list", "watch"}, nil},
		{"root", root, "team-b", all, nil},
		{"root", root, "", []string{"list", "watch"}, nil},
	}
	for _, tc := range cases {
		for _, verb := range tc.allow {
			if err := ops[verb](tc.c, tc.ns); err != nil {
				t.Errorf("%s %s in %q: %v", tc.user, verb, tc.ns, err)
			}
		}
		for _, verb := range tc.denied {
			err := ops[verb](tc.c, tc.ns)
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s %s in %q: %v, want 403", tc.user, verb, tc.ns, err)
			}
		}
	}

	// kube-apiserver's messages.
	_, err := alice.CoordinationV1().Leases("team-b").Get(ctx, "l", metav1.GetOptions{})
	want := `leases.coordination.k8s.io "l" is forbidden: User "alice" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "team-b": No policy matched.`
	if se := wantStatus(t, err, 403, metav1.StatusReasonForbidden); se.ErrStatus.Message != want {
		t.Errorf("get: %q", se.ErrStatus.Message)
	} else if d := se.ErrStatus.Details; d == nil || d.Name != "l" || d.Group != "coordination.k8s.io" || d.Kind != "leases" {
		t.Errorf("details %+v", d)
	}
	_, err = alice.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	want = `leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope: No policy matched.`
	if se := wantStatus(t, err, 403, metav1.StatusReasonForbidden); se.ErrStatus.Message != want {
		t.Errorf("list across namespaces: %q", se.ErrStatus.Message)
	}
	_, err = alice.CoordinationV1().Leases("team-b").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l"})
	want = `leases.coordination.k8s.io "l" is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "team-b": No policy matched.`
	if se := wantStatus(t, err, 403, metav1.StatusReasonForbidden); se.ErrStatus.Message != want {
		t.Errorf("list of one name: %q", se.ErrStatus.Message)
	}
	// Subresources are authorized with their subresource; namespaces
	// are in their own namespace, as in kube-apiserver.
	ns, err := bob.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bob reads his namespace: %v", err)
	}
	_, err = bob.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	want = `namespaces "team-a" is forbidden: User "bob" cannot update resource "namespaces/status" in API group "" in the namespace "team-a": No policy matched.`
	if se := wantStatus(t, err, 403, metav1.StatusReasonForbidden); se.ErrStatus.Message != want {
		t.Errorf("namespace status: %q", se.ErrStatus.Message)
	}
	_, err = bob.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	want = `namespaces is forbidden: User "bob" cannot list resource "namespaces" in API group "" at the cluster scope: No policy matched.`
	if se := wantStatus(t, err, 403, metav1.StatusReasonForbidden); se.ErrStatus.Message != want {
		t.Errorf("namespace list: %q", se.ErrStatus.Message)
	}
	// Nothing denied was written.
	l, err := admin.CoordinationV1().Leases("team-b").Get(ctx, "l", metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "h" {
		t.Errorf("team-b lease after denied writes: %+v %v", l, err)
	}
}

// TestNonResourcePaths: discovery and OpenAPI are readable by every
// authenticated user (kube-apiserver's system:discovery), the rest only
// as policies allow.
func TestNonResourcePaths(t *testing.T) {
	t.Parallel()
	s := startSecure(t, testPolicy)
	alice, ops := s.tokenConfig("alice-token"), s.tokenConfig("ops-token")
	for _, p := range []string{"/api", "/api/v1", "/apis", "/apis/coordination.k8s.io", "/apis/coordination.k8s.io/v1", "/openapi/v2", "/openapi/v3", "/version", "/healthz"} {
		if r := doAs(t, alice, s.URL(), "GET", p, nil, nil); r.code != http.StatusOK {
			t.Errorf("alice GET %s: %d %s", p, r.code, r.body)
		}
	}
	if _, _, err := secClient(t, alice).Discovery().ServerGroupsAndResources(); err != nil {
		t.Errorf("alice discovery: %v", err)
	}
	r := doAs(t, alice, s.URL(), "GET", "/debug/pprof/", nil, nil)
	wantRawStatus(t, r, http.StatusForbidden, "Forbidden", `forbidden: User "alice" cannot get path "/debug/pprof/": No policy matched.`)
	if r := doAs(t, ops, s.URL(), "GET", "/debug/pprof/", nil, nil); r.code != http.StatusOK {
		t.Errorf("ops GET /debug/pprof/: %d", r.code)
	}
	// Discovery is read-only.
	r = doAs(t, alice, s.URL(), "POST", "/apis", nil, strings.NewReader("{}"))
	wantRawStatus(t, r, http.StatusForbidden, "Forbidden", `forbidden: User "alice" cannot post path "/apis": No policy matched.`)
	// The admin may do everything.
	if r := doAs(t, s.Config, s.URL(), "GET", "/debug/pprof/", nil, nil); r.code != http.StatusOK {
		t.Errorf("admin GET /debug/pprof/: %d", r.code)
	}
}

// TestWatchAuthorizedOnce: a watch is authorized when it starts, as in
// kube-apiserver; revoking the policy stops new watches, not a running
// one.
func TestWatchAuthorizedOnce(t *testing.T) {
	t.Parallel()
	s := startSecure(t, testPolicy)
	wanda := secClient(t, s.tokenConfig("watcher-token"))
	w, err := wanda.CoordinationV1().Leases("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Revoke: the policy file without the watchers line.
	var kept []string
	for _, line := range strings.Split(testPolicy, "\n") {
		if !strings.Contains(line, `"watchers"`) {
			kept = append(kept, line)
		}
	}
	writeTestFile(t, s.policyFile, strings.Join(kept, "\n"))
	waitFor(t, func() bool {
		_, err := wanda.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{})
		return apierrors.IsForbidden(err)
	})
	if _, err := wanda.CoordinationV1().Leases("").Watch(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("new watch after revocation: %v", err)
	}
	if _, err := s.Client(t).CoordinationV1().Leases("default").Create(t.Context(), secLease("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w, watch.Added, "after")
}

// TestTokenFileReload: tokens added to or removed from the token file
// take effect without a restart.
func TestTokenFileReload(t *testing.T) {
	t.Parallel()
	s := startSecure(t, "")
	carol := secClient(t, s.tokenConfig("carol-token"))
	whoami := func(c kubernetes.Interface) (*authenticationv1.SelfSubjectReview, error) {
		return c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	}
	if _, err := whoami(carol); !apierrors.IsUnauthorized(err) {
		t.Fatalf("before: %v", err)
	}
	writeTestFile(t, s.tokenFile, testTokens+"carol-token,carol,uid-carol,\"g1,g2\"\n")
	waitFor(t, func() bool { _, err := whoami(carol); return err == nil })
	r, err := whoami(carol)
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Status.UserInfo; u.Username != "carol" || u.UID != "uid-carol" || !slices.Equal(u.Groups, []string{"g1", "g2", "system:authenticated"}) {
		t.Errorf("carol: %+v", u)
	}
	writeTestFile(t, s.tokenFile, testTokens)
	waitFor(t, func() bool { _, err := whoami(carol); return apierrors.IsUnauthorized(err) })
	// A broken file keeps the tokens in force.
	writeTestFile(t, s.tokenFile, "broken\n")
	time.Sleep(500 * time.Millisecond) // several reload periods; nothing to wait for
	if _, err := whoami(secClient(t, s.tokenConfig("bob-token"))); err != nil {
		t.Errorf("bob after a broken file: %v", err)
	}
}

// TestClientCertificates: certificates signed by --client-ca-file
// authenticate as CN in groups O; the admin kubeconfig (leasehold's own
// CA) keeps working.
func TestClientCertificates(t *testing.T) {
	t.Parallel()
	s := startSecure(t, testPolicy)
	dave := secClient(t, s.certConfig(t, "dave", "watchers", "ops"))
	r, err := dave.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Status.UserInfo
	slices.Sort(u.Groups)
	if u.Username != "dave" || !slices.Equal(u.Groups, []string{"ops", "system:authenticated", "watchers"}) ||
		len(u.Extra["authentication.kubernetes.io/credential-id"]) != 1 || !strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "X509SHA256=") {
		t.Errorf("dave: %+v", u)
	}
	// The watchers policy applies to dave through his certificate.
	if _, err := dave.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("dave lists leases: %v", err)
	}
	if _, err := dave.CoordinationV1().Leases("default").Create(t.Context(), secLease("x"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("dave creates: %v", err)
	}
	r, err = s.Client(t).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username != "leasehold-admin" || !slices.Equal(r.Status.UserInfo.Groups, []string{"system:masters", "system:authenticated"}) {
		t.Errorf("admin: %+v %v", r, err)
	}
	// A certificate for server authentication only is refused.
	cert, key := s.clientCA.issueServing(t)
	cfg := s.anonymousConfig()
	cfg.CertData, cfg.KeyData = cert, key
	wantRawStatus(t, doAs(t, cfg, s.URL(), "GET", "/api", nil, nil), http.StatusUnauthorized, "Unauthorized", "Unauthorized")
}

// TestSelfReviews: kubectl auth whoami and can-i through client-go
// (SelfSubjectReview, SelfSubjectAccessReview, SelfSubjectRulesReview),
// in JSON and protobuf.
func TestSelfReviews(t *testing.T) {
	t.Parallel()
	s := startSecure(t, testPolicy)
	for _, proto := range []bool{false, true} {
		cfg := s.tokenConfig("alice-token")
		if proto {
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
		}
		alice := secClient(t, cfg)
		ctx := t.Context()
		who, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := who.Status.UserInfo; u.Username != "alice" || u.UID != "uid-alice" || !slices.Equal(u.Groups, []string{"devs", "system:authenticated"}) || who.CreationTimestamp.IsZero() {
			t.Errorf("whoami: %+v", who)
		}
		can := func(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
			t.Helper()
			r, err := alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra, NonResourceAttributes: nra},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}
		if st := can(&authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, nil); !st.Allowed {
			t.Errorf("create leases in team-a: %+v", st)
		}
		if st := can(&authorizationv1.ResourceAttributes{Namespace: "team-b", Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, nil); st.Allowed || st.Reason != "No policy matched." {
			t.Errorf("create leases in team-b: %+v", st)
		}
		if st := can(nil, &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/apis"}); !st.Allowed {
			t.Errorf("get /apis: %+v", st)
		}
		_, err = alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
		if se := wantStatus(t, err, 422, metav1.StatusReasonInvalid); !strings.Contains(se.ErrStatus.Message, "exactly one of nonResourceAttributes or resourceAttributes must be specified") {
			t.Errorf("empty review: %q", se.ErrStatus.Message)
		}
		rules, err := alice.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "team-a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(rules.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
			return slices.Equal(r.Verbs, []string{"*"}) && slices.Equal(r.Resources, []string{"*"})
		}) {
			t.Errorf("rules in team-a: %+v", rules.Status)
		}
	}
	// The anonymous user may not ask.
	r := doAs(t, s.tokenConfig("nope"), s.URL(), "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", nil, strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	wantRawStatus(t, r, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
	// Reviews are created, not read.
	r = doAs(t, s.tokenConfig("alice-token"), s.URL(), "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews", nil, nil)
	if r.code != http.StatusForbidden {
		t.Errorf("GET selfsubjectreviews: %d %s", r.code, r.body)
	}
	r = doAs(t, s.Config, s.URL(), "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews", nil, nil)
	wantRawStatus(t, r, http.StatusMethodNotAllowed, "MethodNotAllowed", "")
	// Discovery lists them as kube-apiserver does.
	l, err := s.Client(t).Discovery().ServerResourcesForGroupVersion("authorization.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range l.APIResources {
		names = append(names, r.Name)
		if r.Namespaced || !slices.Equal(r.Verbs, []string{"create"}) || r.StorageVersionHash != "" {
			t.Errorf("discovery entry %+v", r)
		}
	}
	if !slices.Equal(names, []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}) {
		t.Errorf("authorization.k8s.io/v1 resources %q", names)
	}

	// A body that is not JSON is worded as for every other kind
	// (kube-apiserver's transformDecodeError), summary included.
	r = doAs(t, s.tokenConfig("alice-token"), s.URL(), "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
		map[string]string{"Content-Type": "application/json"}, strings.NewReader("not json at all"))
	wantRawStatus(t, r, http.StatusBadRequest, string(metav1.StatusReasonBadRequest), "")
	if msg := r.status(t)["message"].(string); !strings.HasPrefix(msg, "the object provided is unrecognized (must be of type SelfSubjectAccessReview): ") ||
		!strings.HasSuffix(msg, " (not json at all)") {
		t.Errorf("message %q", msg)
	}
}

// TestServingCertificate: --tls-cert-file and --tls-private-key-file
// replace the generated serving certificate; the admin kubeconfig trusts
// the root the certificate file ends with; TLS 1.2 is the minimum.
func TestServingCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "my-ca")
	cert, key := ca.issueServing(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeTestFile(t, certFile, string(cert)+ca.certPEM())
	writeTestFile(t, keyFile, string(key))
	s := startSecure(t, "", func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })

	conn, err := tlsDial(t, s.Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "leasehold-test" {
		t.Errorf("served certificate %q", got)
	}
	conn.Close()
	if string(s.Config.CAData) != ca.certPEM() {
		t.Errorf("admin kubeconfig CA:\n%s", s.Config.CAData)
	}
	if _, err := s.Client(t).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("admin through the kubeconfig: %v", err)
	}
	if _, err := tlsDial(t, s.Server, func(c *tls.Config) { c.MaxVersion = tls.VersionTLS11 }); err == nil {
		t.Error("TLS 1.1 handshake succeeded")
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "admin.kubeconfig")); err != nil {
		t.Error(err)
	}
}
