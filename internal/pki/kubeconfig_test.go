package pki

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestWriteKubeconfig: leasehold's cluster, user and context are written
// into admin.kubeconfig and updated when the server URL or the CA changes,
// while what a user added there (a user, a context, a namespace on
// leasehold's context, the current context) stays; an unchanged file is
// not rewritten; a file that does not parse is left alone and refused.
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, "127.0.0.1:6443", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := b.AdminKubeconfig
	if err := b.WriteKubeconfig("https://127.0.0.1:6443", b.CAPEM); err != nil {
		t.Fatal(err)
	}
	kc := loadKubeconfig(t, path)
	if kc.CurrentContext != "leasehold" || kc.Clusters["leasehold"].Server != "https://127.0.0.1:6443" ||
		!bytes.Equal(kc.Clusters["leasehold"].CertificateAuthorityData, b.CAPEM) || len(kc.AuthInfos["leasehold-admin"].ClientKeyData) == 0 {
		t.Fatalf("first write: %+v", kc)
	}

	// What "kubectl config set-credentials / set-context / use-context"
	// would do to the file.
	kc.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Token: "alice-token"}
	kc.Contexts["alice"] = &clientcmdapi.Context{Cluster: "leasehold", AuthInfo: "alice", Namespace: "team-a"}
	kc.Contexts["leasehold"].Namespace = "apps"
	kc.Clusters["leasehold"].TLSServerName = "leasehold.example"
	kc.CurrentContext = "alice"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	edited, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before := stat(t, path)

	if err := b.WriteKubeconfig("https://127.0.0.1:6443", b.CAPEM); err != nil {
		t.Fatal(err)
	}
	if after := stat(t, path); !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("an unchanged kubeconfig was rewritten")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, edited) {
		t.Errorf("an unchanged kubeconfig changed:\n%s", cmp.Diff(string(edited), string(got)))
	}

	// A new listen address and the system's roots (--tls-cert-file).
	if err := b.WriteKubeconfig("https://127.0.0.2:7443", nil); err != nil {
		t.Fatal(err)
	}
	got := loadKubeconfig(t, path)
	if diff := cmp.Diff(kc.AuthInfos["alice"], got.AuthInfos["alice"], ignoreOrigin); diff != "" {
		t.Errorf("user alice changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(kc.Contexts["alice"], got.Contexts["alice"], ignoreOrigin); diff != "" {
		t.Errorf("context alice changed (-want +got):\n%s", diff)
	}
	c := got.Clusters["leasehold"]
	if c.Server != "https://127.0.0.2:7443" || c.CertificateAuthorityData != nil || c.TLSServerName != "leasehold.example" {
		t.Errorf("cluster leasehold: server %s, CA %d bytes, tls-server-name %q", c.Server, len(c.CertificateAuthorityData), c.TLSServerName)
	}
	if got.Contexts["leasehold"].Namespace != "apps" || got.CurrentContext != "alice" {
		t.Errorf("context leasehold's namespace %q, current context %q: want apps, alice", got.Contexts["leasehold"].Namespace, got.CurrentContext)
	}

	// A current context that names nothing points back at leasehold's.
	got.CurrentContext = "gone"
	if err := clientcmd.WriteToFile(*got, path); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteKubeconfig("https://127.0.0.2:7443", nil); err != nil {
		t.Fatal(err)
	}
	if cur := loadKubeconfig(t, path).CurrentContext; cur != "leasehold" {
		t.Errorf("current context %q, want leasehold", cur)
	}

	broken := []byte("apiVersion: v1\nkind: Config\nusers: {{\n")
	if err := os.WriteFile(path, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteKubeconfig("https://127.0.0.2:7443", nil); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("a kubeconfig that does not parse: %v, want an error", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, broken) {
		t.Error("a kubeconfig that does not parse was replaced")
	}
}

func loadKubeconfig(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// ignoreOrigin compares kubeconfig entries as written, not where they were
// loaded from, with an empty extensions map as none.
var ignoreOrigin = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".LocationOfOrigin" }, cmp.Ignore()),
	cmpopts.EquateEmpty(),
}
