package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// secureServer is a server with a token file, a client CA file and,
// optionally, an ABAC policy file, all in dir.
type secureServer struct {
	*testserver.Server
	dir        string
	tokenFile  string
	policyFile string
	clientCA   *testCA
}

// The users of the token file.
const testTokens = `alice-token,alice,uid-alice,"devs"
bob-token,bob,uid-bob
watcher-token,wanda,uid-wanda,watchers
ops-token,oscar,uid-oscar,ops
root-token,root,uid-root,system:masters
holder-mirror-token,system:serviceaccount:operators:holder-mirror,uid-hm,"system:serviceaccounts,system:serviceaccounts:operators"
`

// testPolicy restricts alice to team-a, bob to reading team-a, the
// watchers group to reading leases everywhere, the ops group to the
// /debug paths, and lets anonymous users read leases in public.
const testPolicy = `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"bob","namespace":"team-a","resource":"*","apiGroup":"*","readonly":true}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"watchers","namespace":"*","resource":"leases","apiGroup":"coordination.k8s.io","readonly":true}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"ops","nonResourcePath":"/debug/*","readonly":true}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"system:unauthenticated","namespace":"public","resource":"leases","apiGroup":"coordination.k8s.io","readonly":true}}
`

// startSecure starts a server with testTokens, a client CA, and policy
// as its policy file (ABAC). With an empty policy the server runs with
// its default, RBAC, and the users of testTokens are bound to
// cluster-admin: each may do everything, as every authenticated user
// could before RBAC.
func startSecure(t *testing.T, policy string, opts ...testserver.Option) *secureServer {
	t.Helper()
	s := startWithUsers(t, policy, opts...)
	if policy == "" {
		bindClusterAdmin(t, s, "test-token-users", "alice", "bob", "wanda", "oscar")
	}
	return s
}

// startWithUsers starts a server with testTokens, a client CA, and policy
// as its policy file unless policy is empty; then it runs with RBAC, and
// the users of testTokens may do nothing until bound.
func startWithUsers(t *testing.T, policy string, opts ...testserver.Option) *secureServer {
	t.Helper()
	s := &secureServer{dir: t.TempDir(), clientCA: newTestCA(t, "client-ca")}
	s.tokenFile = filepath.Join(s.dir, "tokens.csv")
	writeTestFile(t, s.tokenFile, testTokens)
	caFile := filepath.Join(s.dir, "client-ca.pem")
	writeTestFile(t, caFile, s.clientCA.certPEM())
	all := []testserver.Option{func(c *server.Config) {
		c.TokenAuthFile = s.tokenFile
		c.ClientCAFile = caFile
		c.AuthReloadInterval = 100 * time.Millisecond
	}}
	if policy != "" {
		s.policyFile = filepath.Join(s.dir, "policy.jsonl")
		writeTestFile(t, s.policyFile, policy)
		all = append(all, func(c *server.Config) { c.AuthorizationPolicyFile = s.policyFile })
	}
	s.Server = testserver.Start(t, append(all, opts...)...)
	return s
}

// bindClusterAdmin binds users to cluster-admin and waits until the
// authorizer sees the binding (it reads the cache, which trails writes).
func bindClusterAdmin(t testing.TB, s *secureServer, name string, users ...string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	for _, u := range users {
		b.Subjects = append(b.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	if _, err := s.Client(t).RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	last := s.tokenConfig(map[string]string{"alice": "alice-token", "bob": "bob-token", "wanda": "watcher-token", "oscar": "ops-token"}[users[len(users)-1]])
	waitFor(t, func() bool {
		_, err := secClient(t, last).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	})
}

func writeTestFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// anonymousConfig trusts the server but carries no credentials.
func (s *secureServer) anonymousConfig() *rest.Config {
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// tokenConfig authenticates with a bearer token.
func (s *secureServer) tokenConfig(token string) *rest.Config {
	cfg := s.anonymousConfig()
	cfg.BearerToken = token
	return cfg
}

// certConfig authenticates with a client certificate from the client CA.
func (s *secureServer) certConfig(t testing.TB, cn string, orgs ...string) *rest.Config {
	cfg := s.anonymousConfig()
	cfg.CertData, cfg.KeyData = s.clientCA.issueClient(t, cn, orgs...)
	return cfg
}

func secClient(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// doAs sends one raw request with cfg's credentials.
func doAs(t testing.TB, cfg *rest.Config, base, method, path string, header map[string]string, body io.Reader) rawResponse {
	t.Helper()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{code: resp.StatusCode, header: resp.Header, body: b}
}

// wantRawStatus fails unless a raw answer is a Status with the code,
// reason and (when not empty) message.
func wantRawStatus(t testing.TB, r rawResponse, code int, reason, message string) {
	t.Helper()
	st := r.status(t)
	if r.code != code || st["kind"] != "Status" || st["reason"] != reason || message != "" && st["message"] != message {
		t.Fatalf("got %d %s, want %d %s %q", r.code, r.body, code, reason, message)
	}
}

// testCA issues certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (ca *testCA) certPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
}

func (ca *testCA) issue(t testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// issueClient issues a client certificate: CN the user, O the groups.
func (ca *testCA) issueClient(t testing.TB, cn string, orgs ...string) (certPEM, keyPEM []byte) {
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issueServing issues a serving certificate for 127.0.0.1 and localhost.
func (ca *testCA) issueServing(t testing.TB) (certPEM, keyPEM []byte) {
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "leasehold-test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
	})
}

// tlsDial opens a TLS connection to the server, trusting its CA, with
// extra settings applied to the client configuration.
func tlsDial(t testing.TB, s *testserver.Server, mutate func(*tls.Config)) (*tls.Conn, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Config.CAData)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if mutate != nil {
		mutate(cfg)
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", strings.TrimPrefix(s.URL(), "https://"), cfg)
}
