package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/asn1"
)

func TestParseTokens(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		want     Tokens
		warnings int
		err      string
	}{
		{name: "three columns", file: "tok1,alice,uid-1\n", want: Tokens{"tok1": {Name: "alice", UID: "uid-1"}}},
		{name: "one group", file: "tok1,alice,uid-1,devs\n", want: Tokens{"tok1": {Name: "alice", UID: "uid-1", Groups: []string{"devs"}}}},
		{
			name: "quoted groups and extra columns",
			file: "tok1,alice,uid-1,\"devs,ops\",ignored\ntok2,bob,,\n",
			want: Tokens{
				"tok1": {Name: "alice", UID: "uid-1", Groups: []string{"devs", "ops"}},
				// kube-apiserver splits an empty fourth column too.
				"tok2": {Name: "bob", Groups: []string{""}},
			},
		},
		{name: "empty token skipped", file: ",alice,uid\ntok2,bob,uid2\n", want: Tokens{"tok2": {Name: "bob", UID: "uid2"}}, warnings: 1},
		{name: "duplicate replaces", file: "t,alice,1\nt,bob,2\n", want: Tokens{"t": {Name: "bob", UID: "2"}}, warnings: 1},
		{name: "empty file", file: "", want: Tokens{}},
		{name: "too few columns", file: "tok1,alice\n", err: "record 1 must have at least 3 columns"},
		{name: "bad quoting", file: "tok1,\"alice,uid\n", err: "extraneous or missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := ParseTokens([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
		})
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func quietReload() Reload {
	return Reload{Interval: time.Second, Logger: slog.New(slog.DiscardHandler)}
}

func TestTokenFileReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tokens.csv")
		writeFile(t, path, "tok1,alice,uid-1\n")
		tf, err := NewTokenFile(path, quietReload())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- tf.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		settle := func() {
			time.Sleep(2 * time.Second)
			synctest.Wait()
		}
		has := func(token, user string) bool {
			u, ok := tf.Lookup(token)
			return ok && u.Name == user
		}

		if !has("tok1", "alice") {
			t.Fatal("tok1 missing at start")
		}
		// A new token appears, a removed one goes.
		writeFile(t, path, "tok2,bob,uid-2\n")
		settle()
		if !has("tok2", "bob") || has("tok1", "alice") {
			t.Fatal("not reloaded after a change")
		}
		// A file that does not parse keeps the previous tokens.
		writeFile(t, path, "broken\n")
		settle()
		if !has("tok2", "bob") {
			t.Fatal("a bad file replaced the tokens")
		}
		// So does a missing one.
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		settle()
		if !has("tok2", "bob") {
			t.Fatal("a missing file replaced the tokens")
		}
		// An atomic replacement (rename) is seen.
		tmp := path + ".new"
		writeFile(t, tmp, "tok3,carol,uid-3\n")
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		settle()
		if !has("tok3", "carol") {
			t.Fatal("not reloaded after a rename")
		}
		// An edit that keeps the size and the modification time is seen
		// by the periodic full check.
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, "tok4,carol,uid-3\n")
		if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(fullCheckEvery * time.Second)
		synctest.Wait()
		if !has("tok4", "carol") {
			t.Fatal("an edit keeping size and time was not seen")
		}
	})
}

func TestNewTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewTokenFile(filepath.Join(dir, "missing"), quietReload()); err == nil {
		t.Error("missing file: no error")
	}
	bad := filepath.Join(dir, "bad")
	writeFile(t, bad, "a,b\n")
	if _, err := NewTokenFile(bad, quietReload()); err == nil || !strings.Contains(err.Error(), "at least 3 columns") {
		t.Errorf("bad file: %v", err)
	}
}

// pkiForTest is a CA that issues client certificates.
type pkiForTest struct {
	t    testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t testing.TB, name string) *pkiForTest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &pkiForTest{t: t, cert: cert, key: key}
}

func (p *pkiForTest) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw}))
}

// issue signs a certificate for subject; ca makes it an intermediate CA.
func (p *pkiForTest) issue(subject pkix.Name, usage []x509.ExtKeyUsage, ca bool) *pkiForTest {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	if ca {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, key.Public(), p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return &pkiForTest{t: p.t, cert: cert, key: key}
}

func requestWithCerts(certs ...*x509.Certificate) *http.Request {
	req, _ := http.NewRequest("GET", "https://leasehold/api", nil)
	if len(certs) > 0 {
		req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	return req
}

func TestX509(t *testing.T) {
	ca := newCA(t, "trusted")
	other := newCA(t, "other")
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	bundle, err := NewCABundle([]*x509.Certificate{ca.cert}, "", Reload{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewX509(bundle)

	alice := ca.issue(pkix.Name{CommonName: "alice", Organization: []string{"devs", "ops"}}, client, false)
	uidName := pkix.Name{CommonName: "bob", ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.X509UID(), Value: "uid-bob"}}}
	intermediate := ca.issue(pkix.Name{CommonName: "intermediate"}, nil, true)
	fp := sha256.Sum256(alice.cert.Raw)

	cases := []struct {
		name  string
		certs []*x509.Certificate
		want  User
		ok    bool
		err   string
	}{
		{name: "no certificate"},
		{name: "trusted", certs: []*x509.Certificate{alice.cert}, ok: true, want: User{
			// Go encodes both organizations in one DER SET, sorted.
			Name: "alice", Groups: []string{"ops", "devs"},
			Extra: map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}},
		}},
		{name: "uid attribute", certs: []*x509.Certificate{ca.issue(uidName, client, false).cert}, ok: true, want: User{Name: "bob", UID: "uid-bob"}},
		{name: "through an intermediate", certs: []*x509.Certificate{intermediate.issue(pkix.Name{CommonName: "carol"}, client, false).cert, intermediate.cert}, ok: true, want: User{Name: "carol"}},
		{name: "unknown CA", certs: []*x509.Certificate{other.issue(pkix.Name{CommonName: "mallory"}, client, false).cert}, err: "certificate signed by unknown authority"},
		{name: "server certificate", certs: []*x509.Certificate{ca.issue(pkix.Name{CommonName: "server"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, false).cert}, err: "incompatible key usage"},
		{name: "no common name", certs: []*x509.Certificate{ca.issue(pkix.Name{Organization: []string{"devs"}}, client, false).cert}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := a.Authenticate(requestWithCerts(tc.certs...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v err %v, want ok %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			if tc.want.Extra == nil {
				got.Extra = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCABundleReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		own, first, second := newCA(t, "own"), newCA(t, "first"), newCA(t, "second")
		path := filepath.Join(t.TempDir(), "ca.pem")
		writeFile(t, path, first.pem())
		b, err := NewCABundle([]*x509.Certificate{own.cert}, path, quietReload())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- b.Run(ctx) }()
		defer func() { cancel(); <-done }()
		a := NewX509(b)
		client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		trusted := func(ca *pkiForTest) bool {
			_, ok, err := a.Authenticate(requestWithCerts(ca.issue(pkix.Name{CommonName: "u"}, client, false).cert))
			return ok && err == nil
		}
		if !trusted(own) || !trusted(first) || trusted(second) {
			t.Fatal("initial trust wrong")
		}
		writeFile(t, path, second.pem())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !trusted(own) || trusted(first) || !trusted(second) {
			t.Fatal("trust after reload wrong")
		}
		// A file without certificates keeps the previous CAs.
		writeFile(t, path, "not a certificate\n")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !trusted(second) {
			t.Fatal("a bad CA file replaced the CAs")
		}
	})
	if _, err := NewCABundle(nil, filepath.Join(t.TempDir(), "missing.pem"), quietReload()); err == nil {
		t.Error("missing CA file: no error")
	}
}

func TestAuthenticatorChain(t *testing.T) {
	ca := newCA(t, "ca")
	bundle, err := NewCABundle([]*x509.Certificate{ca.cert}, "", Reload{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, path, "good,alice,uid-a,devs\nmaster,root,uid-r,system:masters\nauthd,eve,uid-e,system:authenticated\n")
	tokens, err := NewTokenFile(path, quietReload())
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.issue(pkix.Name{CommonName: "carol", Organization: []string{"ops"}}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false).cert
	untrusted := newCA(t, "other").issue(pkix.Name{CommonName: "mallory"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false).cert

	cases := []struct {
		name        string
		anonymous   bool
		noTokenFile bool
		certs       []*x509.Certificate
		header      string
		want        User
		ok, err     bool
	}{
		{name: "nothing", ok: false},
		{name: "nothing, anonymous allowed", anonymous: true, ok: true, want: User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "token", header: "Bearer good", ok: true, want: User{Name: "alice", UID: "uid-a", Groups: []string{"devs", "system:authenticated"}}},
		{name: "scheme is case-insensitive", header: "bearer good", ok: true, want: User{Name: "alice", UID: "uid-a", Groups: []string{"devs", "system:authenticated"}}},
		{name: "already authenticated group is not repeated", header: "Bearer authd", ok: true, want: User{Name: "eve", UID: "uid-e", Groups: []string{"system:authenticated"}}},
		{name: "unknown token", header: "Bearer bad", err: true},
		{name: "unknown token, anonymous allowed", anonymous: true, header: "Bearer bad", err: true},
		{name: "basic auth is no credential", anonymous: true, header: "Basic YWxpY2U6cHc=", ok: true, want: User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "empty bearer is no credential", header: "Bearer ", ok: false},
		{name: "certificate", certs: []*x509.Certificate{cert}, ok: true, want: User{Name: "carol", Groups: []string{"ops", "system:authenticated"}}},
		{name: "certificate wins over a bad token", certs: []*x509.Certificate{cert}, header: "Bearer bad", ok: true, want: User{Name: "carol", Groups: []string{"ops", "system:authenticated"}}},
		{name: "token wins over an untrusted certificate", certs: []*x509.Certificate{untrusted}, header: "Bearer master", ok: true, want: User{Name: "root", UID: "uid-r", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "untrusted certificate, anonymous allowed", anonymous: true, certs: []*x509.Certificate{untrusted}, err: true},
		{name: "any token without a token file, anonymous allowed", noTokenFile: true, anonymous: true, header: "Bearer good", err: true},
		{name: "no token without a token file, anonymous allowed", noTokenFile: true, anonymous: true, ok: true, want: User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := AuthenticatorConfig{ClientCAs: bundle, Tokens: tokens, Anonymous: tc.anonymous}
			if tc.noTokenFile {
				cfg.Tokens = nil
			}
			a := NewAuthenticator(cfg)
			req := requestWithCerts(tc.certs...)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			// The server's handler gets a shallow copy of the request:
			// the original's headers must stay as they were.
			orig := req
			req = req.WithContext(req.Context())
			got, ok, err := a.Authenticate(req)
			if orig.Header.Get("Authorization") != tc.header {
				t.Error("authentication changed the headers of another copy of the request")
			}
			if (err != nil) != tc.err || ok != tc.ok {
				t.Fatalf("ok %v err %v, want ok %v err %v", ok, err, tc.ok, tc.err)
			}
			if !ok {
				return
			}
			got.Extra = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
			if strings.HasPrefix(tc.header, "Bearer") && len(tc.certs) == 0 && req.Header.Get("Authorization") != "" {
				t.Error("a recognised token stays in the request")
			}
		})
	}
}

// TestX509Cache: a verification is reused only while the trusted CAs stay
// the same and the certificate is valid.
func TestX509Cache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, second := newCA(t, "first"), newCA(t, "second")
		path := filepath.Join(t.TempDir(), "ca.pem")
		writeFile(t, path, first.pem())
		b, err := NewCABundle(nil, path, quietReload())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- b.Run(ctx) }()
		defer func() { cancel(); <-done }()
		a := NewX509(b)
		req := requestWithCerts(first.issue(pkix.Name{CommonName: "u", Organization: []string{"g"}}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false).cert)
		for range 3 {
			u, ok, err := a.Authenticate(req)
			if !ok || err != nil || u.Name != "u" {
				t.Fatalf("%+v %v %v", u, ok, err)
			}
			u.Groups[0] = "changed" // callers may not change the cached user
		}
		if u, _, _ := a.Authenticate(req); u.Groups[0] != "g" {
			t.Fatalf("cached groups changed: %q", u.Groups)
		}
		// The same certificate, once its CA is no longer trusted.
		writeFile(t, path, second.pem())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, ok, err := a.Authenticate(req); ok || err == nil {
			t.Fatal("a cached verification outlived its CA")
		}
		// And once it has expired (it is valid for an hour).
		writeFile(t, path, first.pem())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, ok, _ := a.Authenticate(req); !ok {
			t.Fatal("not trusted again")
		}
		a.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		if _, ok, err := a.Authenticate(req); ok || err == nil {
			t.Fatal("an expired certificate was accepted from the cache")
		}
	})
}
