package multi

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestSharedCredentials checks the deployment's credential sharing: every
// replica has a serving certificate of its own signed by the shared CA,
// every replica's admin.kubeconfig differs from the first one's only in
// its server URL, the first one's works against every replica, and a
// client certificate from another leasehold's CA is refused.
func TestSharedCredentials(t *testing.T) {
	d := deploy(t, 3, startInProcess)
	ca := readCert(t, filepath.Join(d.replicas[0].DataDir(), "pki", "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	first, err := clientcmd.LoadFromFile(filepath.Join(d.replicas[0].DataDir(), "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	serials := map[string]bool{}
	for i, r := range d.replicas {
		serving := readCert(t, filepath.Join(r.DataDir(), "pki", "serving.crt"))
		if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
			t.Errorf("%s: serving certificate: %v", r.Name(), err)
		}
		serials[serving.SerialNumber.String()] = true

		kc, err := clientcmd.LoadFromFile(filepath.Join(r.DataDir(), "admin.kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		for name, cl := range kc.Clusters {
			if cl.Server != r.URL() {
				t.Errorf("%s: kubeconfig server %s, want %s", r.Name(), cl.Server, r.URL())
			}
			if !bytes.Equal(cl.CertificateAuthorityData, first.Clusters[name].CertificateAuthorityData) {
				t.Errorf("%s: kubeconfig CA differs from %s's", r.Name(), d.replicas[0].Name())
			}
		}
		for name, u := range kc.AuthInfos {
			if !bytes.Equal(u.ClientCertificateData, first.AuthInfos[name].ClientCertificateData) {
				t.Errorf("%s: admin client certificate differs from %s's", r.Name(), d.replicas[0].Name())
			}
		}

		// The first replica's credentials, this replica's URL.
		c := kubernetes.NewForConfigOrDie(d.configFor(i))
		name := "written-through-" + r.Name()
		if _, err := c.CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("create through %s with %s's admin.kubeconfig: %v", r.Name(), d.replicas[0].Name(), err)
		}
		next := kubernetes.NewForConfigOrDie(d.configFor((i + 1) % len(d.replicas)))
		if _, err := next.CoordinationV1().Leases("default").Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("read back through the next replica: %v", err)
		}
	}
	if len(serials) != len(d.replicas) {
		t.Errorf("%d distinct serving certificates for %d replicas", len(serials), len(d.replicas))
	}

	// Another leasehold's admin certificate (another CA) is refused.
	other := testserver.Start(t)
	cfg := rest.CopyConfig(other.Config)
	cfg.Host = d.replicas[0].URL()
	cfg.CAData = first.Clusters[first.Contexts[first.CurrentContext].Cluster].CertificateAuthorityData
	c := kubernetes.NewForConfigOrDie(cfg)
	_, err = c.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	if err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
	t.Logf("another CA's client certificate: %v", err)
}

func readCert(t testing.TB, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
