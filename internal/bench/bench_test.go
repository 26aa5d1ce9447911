package bench

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: t
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestNewEnvSpreadsOverKubeconfigs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeKubeconfig(t, a, "https://127.0.0.1:1")
	writeKubeconfig(t, b, "https://127.0.0.1:2")

	e, err := NewEnv(a+","+b, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Configs) != 2 || e.Config != e.Configs[0] {
		t.Fatalf("got %d configs, Config first: %v", len(e.Configs), e.Config == e.Configs[0])
	}
	for i, want := range []string{"https://127.0.0.1:1", "https://127.0.0.1:2", "https://127.0.0.1:1"} {
		if got := e.configFor(i).Host; got != want {
			t.Errorf("client %d: server %s, want %s", i, got, want)
		}
	}

	// One kubeconfig, as before.
	e, err = NewEnv(b, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Configs) != 1 || e.configFor(5).Host != "https://127.0.0.1:2" {
		t.Errorf("one kubeconfig: %d configs, client 5 on %s", len(e.Configs), e.configFor(5).Host)
	}

	// A file whose name has a comma is one kubeconfig.
	c := filepath.Join(dir, "with,comma")
	writeKubeconfig(t, c, "https://127.0.0.1:3")
	if e, err = NewEnv(c, nil, io.Discard); err != nil || len(e.Configs) != 1 {
		t.Errorf("kubeconfig named with a comma: %v, %v", e, err)
	}
}
