package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/apis/asn1"
)

// CABundle is the set of CAs trusted to sign client certificates: fixed
// ones (leasehold's own CA) and, optionally, those of a PEM file
// (--client-ca-file) that is re-read when it changes.
type CABundle struct {
	fixed []*x509.Certificate
	// pool is the pool of fixed alone when there is no file.
	pool *x509.CertPool
	file *fileSource[*x509.CertPool]
}

// NewCABundle trusts fixed and, when file is not empty, the certificates
// of that PEM file. The file must hold at least one certificate.
func NewCABundle(fixed []*x509.Certificate, file string, reload Reload) (*CABundle, error) {
	b := &CABundle{fixed: fixed}
	if file == "" {
		b.pool = b.build(nil)
		return b, nil
	}
	src, err := newFileSource(file, "client CA file", func(data []byte) (*x509.CertPool, error) {
		certs, err := ParseCertificates(data)
		if err != nil {
			return nil, err
		}
		return b.build(certs), nil
	}, reload)
	if err != nil {
		return nil, err
	}
	b.file = src
	return b, nil
}

func (b *CABundle) build(extra []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range b.fixed {
		p.AddCert(c)
	}
	for _, c := range extra {
		p.AddCert(c)
	}
	return p
}

// Pool returns the trusted CAs. The pool must not be modified.
func (b *CABundle) Pool() *x509.CertPool {
	if b.file == nil {
		return b.pool
	}
	return b.file.get()
}

// Run re-reads the CA file when it changes, until ctx ends.
func (b *CABundle) Run(ctx context.Context) error {
	if b.file == nil {
		<-ctx.Done()
		return nil
	}
	return b.file.Run(ctx)
}

// ParseCertificates parses the CERTIFICATE blocks of PEM data; other
// blocks are skipped. It fails when there is no certificate or one does
// not parse.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// X509 authenticates requests by their client certificate, as
// kube-apiserver's x509 authenticator with CommonNameUserConversion does
// (apiserver/pkg/authentication/request/x509): the certificate must chain
// to a trusted CA (intermediates may come with it) and allow client
// authentication; the common name is the user, the organizations are the
// groups, a subject attribute with Kubernetes' UID OID (1.3.6.1.4.1.57683.2)
// the uid, and the certificate's SHA-256 the credential id.
//
// The TLS layer only requests certificates (tls.RequestClientCert):
// verification happens here, so that a certificate that does not verify
// is a 401, as in kube-apiserver, rather than a failed handshake.
//
// Verifying a chain costs a few hundred microseconds, and clients send
// the same certificate with every request of a connection: results are
// kept for a minute (never past a certificate's expiry, and only while
// the trusted CAs stay the same).
type X509 struct {
	roots *CABundle
	now   func() time.Time

	mu sync.Mutex // guards results
	// results holds recent verifications by the SHA-256 of the chain the
	// client sent; it is emptied when it reaches x509CacheSize entries.
	results map[[32]byte]x509Result
	// chains maps a connection's leaf certificate (one object per
	// connection, which all its requests share) to its chain's key:
	// only a connection's first request hashes the chain (1% of a
	// renewal's cost).
	chains map[weak.Pointer[x509.Certificate]][32]byte
}

// x509Result is a verification outcome and how long it may be reused.
type x509Result struct {
	roots *x509.CertPool
	until time.Time
	user  User
	ok    bool
	err   error
}

const (
	x509CacheSize = 4096
	x509CacheTTL  = time.Minute
)

// NewX509 returns an authenticator trusting the CAs of roots.
func NewX509(roots *CABundle) *X509 {
	return &X509{roots: roots, now: time.Now, results: map[[32]byte]x509Result{}, chains: map[weak.Pointer[x509.Certificate]][32]byte{}}
}

// Authenticate returns ok false when the request carries no client
// certificate, and an error when its certificate does not verify.
func (a *X509) Authenticate(req *http.Request) (User, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	chain := req.TLS.PeerCertificates
	leaf := weak.Make(chain[0])
	roots, now := a.roots.Pool(), a.now()

	a.mu.Lock()
	key, known := a.chains[leaf]
	a.mu.Unlock()
	if !known {
		h := sha256.New()
		for _, c := range chain {
			h.Write(c.Raw)
		}
		h.Sum(key[:0])
	}
	a.mu.Lock()
	r, hit := a.results[key]
	if hit && !known && len(a.chains) < x509CacheSize {
		a.chains[leaf] = key
	}
	a.mu.Unlock()
	if hit && r.roots == roots && now.Before(r.until) {
		r.user.Groups = slices.Clone(r.user.Groups)
		return r.user, r.ok, r.err
	}

	r = x509Result{roots: roots, until: now.Add(x509CacheTTL)}
	for _, c := range chain {
		if c.NotAfter.Before(r.until) {
			r.until = c.NotAfter
		}
	}
	r.user, r.ok, r.err = verify(chain, roots, now)
	a.mu.Lock()
	if len(a.results) >= x509CacheSize || len(a.chains) >= x509CacheSize {
		clear(a.results)
		clear(a.chains)
	}
	a.results[key] = r
	a.chains[leaf] = key
	a.mu.Unlock()
	r.user.Groups = slices.Clone(r.user.Groups)
	return r.user, r.ok, r.err
}

// verify verifies a client's chain against roots at now and maps its leaf
// to a user.
func verify(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (User, bool, error) {
	opts := x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(chain) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range chain[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	leaf := chain[0]
	if _, err := leaf.Verify(opts); err != nil {
		return User{}, false, fmt.Errorf("verifying certificate %s failed: %w", certificateIdentifier(leaf), err)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, false, nil
	}
	uid, err := certificateUID(leaf)
	if err != nil {
		return User{}, false, err
	}
	fp := sha256.Sum256(leaf.Raw)
	return User{
		Name:   leaf.Subject.CommonName,
		UID:    uid,
		Groups: append([]string(nil), leaf.Subject.Organization...),
		Extra:  map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}},
	}, true, nil
}

// certificateUID reads the subject's UID attribute, as kube-apiserver does
// with AllowParsingUserUIDFromCertAuth (beta, on by default since 1.33).
func certificateUID(c *x509.Certificate) (string, error) {
	oid := asn1.X509UID()
	var uids []string
	for _, name := range c.Subject.Names {
		if !name.Type.Equal(oid) {
			continue
		}
		uid, ok := name.Value.(string)
		if !ok {
			return "", errors.New("unable to parse UID into a string")
		}
		uids = append(uids, uid)
	}
	switch {
	case len(uids) == 0:
		return "", nil
	case len(uids) > 1:
		return "", fmt.Errorf("expected 1 UID, but found multiple: %v", uids)
	case uids[0] == "":
		return "", errors.New("UID cannot be an empty string")
	}
	return uids[0], nil
}

func certificateIdentifier(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%d, SKID=%s, AKID=%s", c.SerialNumber, colonHex(c.SubjectKeyId), colonHex(c.AuthorityKeyId))
}

func colonHex(d []byte) string {
	h := strings.ToUpper(hex.EncodeToString(d))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}
