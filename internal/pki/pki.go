package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Bundle is the certificate material a server runs with.
type Bundle struct {
	// CA signs the serving and client certificates; its pool verifies
	// client certificates.
	CACert *x509.Certificate
	CAPEM  []byte
	caKey  crypto.Signer
	// Serving is the server's TLS certificate.
	Serving tls.Certificate
	// AdminKubeconfig is the path of the admin kubeconfig, which
	// WriteKubeconfig writes.
	AdminKubeconfig string
	admin           tls.Certificate
}

const (
	caValidity     = 10 * 365 * 24 * time.Hour
	leafValidity   = 365 * 24 * time.Hour
	renewBefore    = 30 * 24 * time.Hour
	adminUser      = "leasehold-admin"
	adminGroup     = "system:masters"
	kubeconfigName = "admin.kubeconfig"
)

// Ensure loads or creates the certificates under dir for a server that
// listens on listen (host:port). The admin kubeconfig is written
// separately, by WriteKubeconfig, once the server knows which CA its
// clients must trust.
func Ensure(dir, listen string, now time.Time) (*Bundle, error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	caCert, caKey, err := loadOrCreateCA(pkiDir, now)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("pki: listen address %q: %w", listen, err)
	}
	b := &Bundle{CACert: caCert, caKey: caKey, CAPEM: pemCert(caCert)}

	hosts := servingHosts(host)
	serving, err := loadOrCreateLeaf(pkiDir, "serving", now, caCert, caKey, func(c *x509.Certificate) bool {
		return coversHosts(c, hosts)
	}, func(tmpl *x509.Certificate) {
		tmpl.Subject = pkix.Name{CommonName: "leasehold"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	b.Serving = serving

	admin, err := loadOrCreateLeaf(pkiDir, "admin", now, caCert, caKey, func(*x509.Certificate) bool { return true }, func(tmpl *x509.Certificate) {
		tmpl.Subject = pkix.Name{CommonName: adminUser, Organization: []string{adminGroup}}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	if err != nil {
		return nil, err
	}
	b.admin = admin
	b.AdminKubeconfig = filepath.Join(dir, kubeconfigName)
	return b, nil
}

// servingHosts are the names the serving certificate covers.
func servingHosts(listenHost string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if listenHost != "" && listenHost != "0.0.0.0" && listenHost != "::" && !slices.Contains(hosts, listenHost) {
		hosts = append(hosts, listenHost)
	}
	if listenHost == "0.0.0.0" || listenHost == "::" || listenHost == "" {
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
	}
	return hosts
}

func coversHosts(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func loadOrCreateCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	cert, key, err := load(dir, "ca")
	if err == nil && now.Before(cert.NotAfter.Add(-renewBefore)) {
		return cert, key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "leasehold-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, save(dir, "ca", cert, key)
}

// loadOrCreateLeaf returns the certificate dir/name.crt, creating it when
// missing, expiring, not signed by the CA, or rejected by ok.
func loadOrCreateLeaf(dir, name string, now time.Time, ca *x509.Certificate, caKey crypto.Signer, ok func(*x509.Certificate) bool, fill func(*x509.Certificate)) (tls.Certificate, error) {
	cert, key, err := load(dir, name)
	if err == nil && now.Before(cert.NotAfter.Add(-renewBefore)) && cert.CheckSignatureFrom(ca) == nil && ok(cert) {
		return tlsCert(cert, key)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, err
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	fill(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := save(dir, name, cert, key); err != nil {
		return tls.Certificate{}, err
	}
	return tlsCert(cert, key)
}

func tlsCert(cert *x509.Certificate, key crypto.Signer) (tls.Certificate, error) {
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func pemKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func save(dir, name string, cert *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := pemKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, name+".crt"), pemCert(cert), 0o644)
}

func load(dir, name string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", name, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("pki: %s: key cannot sign", name)
	}
	return pair.Leaf, signer, nil
}

// writeFileAtomic writes through a temporary file and a rename, so that a
// crash never leaves a truncated key or certificate behind.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
