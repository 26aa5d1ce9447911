package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testkit/testbin"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestKubectlDescribeLockEvents: leasehold lock records client-go's
// leader election Events on its lease, so that kubectl describe lease
// tells who held it and when they stopped.
func TestKubectlDescribeLockEvents(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	bin, err := testbin.Build(testbin.Leasehold)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "second"} {
		cmd := exec.Command(bin, "lock", "--kubeconfig", s.Kubeconfig(), "--identity", id, "nightly", "--", "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("leasehold lock as %s: %v\n%s", id, err, out)
		}
	}
	out := newKubectl(t, s).ok("", "describe", "lease", "nightly")
	var events []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "LeaderElection") {
			events = append(events, strings.Join(strings.Fields(line), " "))
		}
	}
	// Events within one second may show in either order.
	for _, who := range []string{"first", "second"} {
		for _, what := range []string{"became leader", "stopped leading"} {
			n := 0
			for _, e := range events {
				if strings.Contains(e, "leasehold-lock") && strings.Contains(e, who+"_") && strings.HasSuffix(e, what) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("describe shows %d events %q of %s from leasehold-lock, want 1:\n%s", n, what, who, out)
			}
		}
	}
}
