// Package e2e drives leasehold with a real kubectl, built from the
// k8s.io/kubectl module, and checks its output and the stored objects.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// kubectlPath is the kubectl built for this test run.
var kubectlPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasehold-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubectlPath = filepath.Join(dir, "kubectl")
	// Stamp a real version so kubectl's version-skew logic sees a
	// matching client, as a released kubectl would.
	ldflags := "-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
	build := exec.Command("go", "build", "-ldflags", ldflags, "-o", kubectlPath, "github.com/leasehold/leasehold/test/kubectl")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kubectl: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kubectl runs kubectl against a server.
type kubectl struct {
	t          testing.TB
	kubeconfig string
	env        []string
}

func newKubectl(t testing.TB, s *testserver.Server) *kubectl {
	return &kubectl{t: t, kubeconfig: s.Kubeconfig()}
}

// run runs kubectl with args and stdin, returning stdout and stderr.
func (k *kubectl) run(stdin string, args ...string) (stdout, stderr string, err error) {
	k.t.Helper()
	cmd := exec.Command(kubectlPath, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "HOME="+k.t.TempDir())
	cmd.Env = append(cmd.Env, k.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// ok runs kubectl and fails the test unless it succeeds.
func (k *kubectl) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// fails runs kubectl and fails the test unless it fails; it returns stderr.
func (k *kubectl) fails(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, err := k.run(stdin, args...)
	if err == nil {
		k.t.Fatalf("kubectl %s succeeded, want failure\nstdout:\n%s", strings.Join(args, " "), out)
	}
	return errOut
}
