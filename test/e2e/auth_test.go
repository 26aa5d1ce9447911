package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

const authTokens = "alice-token,alice,uid-alice,devs\n"

const authPolicy = `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*"}}
`

// userKubeconfig writes a kubeconfig for the server with a bearer token.
func userKubeconfig(t *testing.T, s *testserver.Server, name, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["leasehold"] = &clientcmdapi.Cluster{Server: s.URL(), CertificateAuthorityData: s.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "leasehold", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubectlAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens, policy := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "policy.jsonl")
	for path, content := range map[string]string{tokens: authTokens, policy: authPolicy} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := testserver.Start(t, func(c *server.Config) { c.TokenAuthFile, c.AuthorizationPolicyFile = tokens, policy })
	admin := newKubectl(t, s)
	admin.ok("", "create", "namespace", "team-a")
	admin.ok("", "create", "namespace", "team-b")

	// kubectl auth whoami.
	out := admin.ok("", "auth", "whoami")
	if !regexp.MustCompile(`(?m)^Username\s+leasehold-admin$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Groups\s+\[system:masters system:authenticated\]$`).MatchString(out) ||
		!strings.Contains(out, "authentication.kubernetes.io/credential-id") {
		t.Errorf("admin whoami:\n%s", out)
	}
	alice := &kubectl{t: t, kubeconfig: userKubeconfig(t, s, "alice", "alice-token")}
	if out := alice.ok("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.uid} {.status.userInfo.groups}"); out != `alice uid-alice ["devs","system:authenticated"]` {
		t.Errorf("alice whoami: %q", out)
	}

	// kubectl auth can-i: "yes", or "no" with the reason and exit status 1.
	if out := admin.ok("", "auth", "can-i", "delete", "namespaces"); strings.TrimSpace(out) != "yes" {
		t.Errorf("admin can-i: %q", out)
	}
	if out := alice.ok("", "auth", "can-i", "create", "leases", "-n", "team-a"); strings.TrimSpace(out) != "yes" {
		t.Errorf("alice can-i in team-a: %q", out)
	}
	out, _, err := alice.run("", "auth", "can-i", "create", "leases", "-n", "team-b")
	if err == nil || strings.TrimSpace(out) != "no - No policy matched." {
		t.Errorf("alice can-i in team-b: %q %v", out, err)
	}
	if out, _, err := alice.run("", "auth", "can-i", "get", "/debug/pprof/"); err == nil || strings.TrimSpace(out) != "no - No policy matched." {
		t.Errorf("alice can-i get /debug/pprof/: %q %v", out, err)
	}
	if out := alice.ok("", "auth", "can-i", "get", "/apis"); strings.TrimSpace(out) != "yes" {
		t.Errorf("alice can-i get /apis: %q", out)
	}
	out = alice.ok("", "auth", "can-i", "--list", "-n", "team-a")
	if !regexp.MustCompile(`(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^selfsubjectreviews\.authentication\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$`).MatchString(out) {
		t.Errorf("alice can-i --list:\n%s", out)
	}

	// Forbidden and unauthorized, as kubectl reports them.
	if out := alice.ok(leaseYAML, "-n", "team-a", "create", "-f", "-"); strings.TrimSpace(out) != "lease.coordination.k8s.io/my-lease created" {
		t.Errorf("alice create in team-a: %q", out)
	}
	errOut := alice.fails("", "-n", "team-b", "get", "leases")
	if want := `Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "team-b": No policy matched.`; strings.TrimSpace(errOut) != want {
		t.Errorf("alice get leases in team-b:\n%s", errOut)
	}
	// (Without any credential kubectl would prompt for a password.)
	nobody := &kubectl{t: t, kubeconfig: userKubeconfig(t, s, "nobody", "not-a-token")}
	if errOut := nobody.fails("", "get", "leases"); !strings.Contains(errOut, "error: You must be logged in to the server (the server has asked for the client to provide credentials)") {
		t.Errorf("with a bad token:\n%s", errOut)
	}
}
