package integration

import (
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testkit/locktest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestRegisterGRPC: three gRPC servers registered with `leasehold
// register` (the real binary) are found by a gRPC client resolving
// through EndpointSlices; calls spread over them. One registration
// killed with SIGKILL stops getting calls once its lease expires; one
// ended with SIGTERM at once, its Lease deleted.
func TestRegisterGRPC(t *testing.T) {
	ts := testserver.Start(t)
	bin := locktest.Build(t)
	c := ts.Client(t)
	ctx := t.Context()
	ns := "registered"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	g := newGRPCEnv(t, ts, 3)
	const duration = 3 * time.Second
	var procs []*locktest.Proc
	for _, ip := range g.registered {
		procs = append(procs, locktest.Start(t, bin.Leasehold, "register", "--kubeconfig", ts.Kubeconfig(), "-n", ns,
			"--lease-duration", "3s", "--port-name", "grpc", "--log-level", "info", "api", ip+":50051"))
	}
	g.spread(t, ns, "api", g.registered)

	procs[0].Signal(t, syscall.SIGKILL)
	killed := time.Now()
	g.spread(t, ns, "api", g.registered[1:])
	t.Logf("SIGKILL: calls stopped reaching it %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond), duration)
	if d := time.Since(killed); d > duration+3*time.Second {
		t.Errorf("SIGKILL: calls stopped %v after the kill, want within the lease's %v and a second (and slack for a loaded machine)", d, duration)
	}

	procs[1].Signal(t, syscall.SIGTERM)
	termed := time.Now()
	if code, _ := procs[1].Wait(t, 10*time.Second); code != 0 {
		t.Errorf("register after SIGTERM: exit code %d, want 0", code)
	}
	g.spread(t, ns, "api", g.registered[2:])
	t.Logf("SIGTERM: calls stopped reaching it %v after the signal", time.Since(termed).Round(time.Millisecond))
	if d := time.Since(termed); d > 2*time.Second+2*time.Second {
		t.Errorf("SIGTERM: calls stopped %v after the signal, want within 2 s (and slack)", d)
	}
	// The SIGTERMed one's Lease was deleted by register itself; the
	// SIGKILLed one's by the server, after its expiry.
	for _, gone := range []string{"api-192-0-2-2-50051", "api-192-0-2-1-50051"} {
		waitFor(t, func() bool { return !leaseExists(t, c, ns, gone) })
	}
	if !leaseExists(t, c, ns, "api-192-0-2-3-50051") {
		t.Error("the live registration's Lease is gone")
	}
}
