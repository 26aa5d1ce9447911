package pki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestEnsure: a first start creates the CA, a serving certificate for the
// listen address and an admin kubeconfig (0600) that trusts the CA and
// authenticates as system:masters; a restart keeps the CA and the serving
// certificate; a new listen address gets a new serving certificate from
// the same CA; a certificate near its end is renewed.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first, err := Ensure(dir, "10.1.2.3:6443", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.WriteKubeconfig("https://10.1.2.3:6443", first.CAPEM); err != nil {
		t.Fatal(err)
	}
	if err := first.Serving.Leaf.VerifyHostname("10.1.2.3"); err != nil {
		t.Errorf("serving certificate does not cover the listen address: %v", err)
	}
	for _, h := range []string{"localhost", "127.0.0.1"} {
		if err := first.Serving.Leaf.VerifyHostname(h); err != nil {
			t.Errorf("serving certificate does not cover %s: %v", h, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(first.CACert)
	if _, err := first.Serving.Leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now}); err != nil {
		t.Errorf("serving certificate not signed by the CA: %v", err)
	}

	info, err := os.Stat(first.AdminKubeconfig)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("admin.kubeconfig: %v %v", info, err)
	}
	kc, err := clientcmd.LoadFromFile(first.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	if cluster.Server != "https://10.1.2.3:6443" || string(cluster.CertificateAuthorityData) != string(first.CAPEM) {
		t.Errorf("kubeconfig cluster %s, CA %t", cluster.Server, string(cluster.CertificateAuthorityData) == string(first.CAPEM))
	}
	admin, err := x509.ParseCertificate(mustDecodePEM(t, user.ClientCertificateData))
	if err != nil {
		t.Fatal(err)
	}
	if admin.Subject.CommonName != "leasehold-admin" || len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin subject %v", admin.Subject)
	}

	again, err := Ensure(dir, "10.1.2.3:6443", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !again.CACert.Equal(first.CACert) || !again.Serving.Leaf.Equal(first.Serving.Leaf) {
		t.Error("a restart replaced the CA or the serving certificate")
	}

	moved, err := Ensure(dir, "10.9.9.9:7443", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !moved.CACert.Equal(first.CACert) || moved.Serving.Leaf.Equal(first.Serving.Leaf) || moved.Serving.Leaf.VerifyHostname("10.9.9.9") != nil {
		t.Error("a new listen address kept the old serving certificate or changed the CA")
	}

	late := first.Serving.Leaf.NotAfter.Add(-24 * time.Hour)
	renewed, err := Ensure(dir, "10.9.9.9:7443", late)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Serving.Leaf.Equal(moved.Serving.Leaf) || !renewed.Serving.Leaf.NotAfter.After(late.Add(30*24*time.Hour)) {
		t.Errorf("a serving certificate a day from its end was not renewed: %v", renewed.Serving.Leaf.NotAfter)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki", "ca.key")); err != nil {
		t.Errorf("CA key: %v", err)
	}
}

func mustDecodePEM(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b.Bytes
}
