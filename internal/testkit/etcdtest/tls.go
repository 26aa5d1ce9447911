package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a cluster started with Config.TLS: the CA
// that signed the members' serving certificate and the client certificate
// they require.
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// ClientConfig is a TLS client configuration that trusts the CA and
// presents the client certificate.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	ca, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcdtest: no certificate in %s", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serverTLS are the members' serving certificate and key (one for all of
// them: they all listen on 127.0.0.1).
type serverTLS struct {
	certFile, keyFile string
}

// makeTLS writes a CA, a serving certificate for 127.0.0.1 and a client
// certificate into dir.
func makeTLS(dir string) (TLSFiles, serverTLS, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcdtest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	files := TLSFiles{CAFile: filepath.Join(dir, "ca.crt")}
	if err := writePEM(files.CAFile, "CERTIFICATE", caDER); err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (certFile, keyFile string, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", err
		}
		certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certFile, keyFile, writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	var srv serverTLS
	if srv.certFile, srv.keyFile, err = leaf("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	if files.CertFile, files.KeyFile, err = leaf("client", 3, x509.ExtKeyUsageClientAuth, nil); err != nil {
		return TLSFiles{}, serverTLS{}, err
	}
	return files, srv, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
