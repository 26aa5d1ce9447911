//go:build unix

package multi

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/lock"
	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

// TestLockReplicaLoss runs `leasehold lock` processes in a loop on one
// lease, through TCP balancers in front of three real replica processes
// on etcd, and SIGKILLs the replica that the holder of a long-running
// command talks to. The holder either keeps the lease (its client
// reconnects through the balancer to another replica) or loses it cleanly;
// either way no two commands ever run at once (each takes an flock, which
// the kernel drops however the command ends) and the fencing tokens
// strictly increase in the order the commands ran.
func TestLockReplicaLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	d := deploy(t, 3, startProcess)
	bin := locktest.Build(t)
	dir := t.TempDir()
	// Each balancer sends its n-th connection to replica n mod 3: the
	// holder's, used by one process whose one (HTTP/2) connection is its
	// first, goes to replica 0.
	holderLB := startBalancer(t, d.addrs())
	holderConfig := balancedKubeconfig(t, d, holderLB.URL())
	othersConfig := balancedKubeconfig(t, d, startBalancer(t, d.addrs()).URL())
	lockArgs := func(kubeconfig string, child ...string) []string {
		args := append([]string{"lock", "--kubeconfig", kubeconfig, "--log-level", "info"}, locktest.Fast...)
		return append(append(args, "replicated", "--", bin.Child), child...)
	}

	var mu sync.Mutex // guards codes
	codes := map[int]int{}
	record := func(p *locktest.Proc) {
		code, err := p.Code(time.Minute)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		codes[code]++
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				record(locktest.Start(t, bin.Leasehold, lockArgs(othersConfig, "exclusive", dir, "100ms")...))
			}
		})
	}
	time.Sleep(phaseTime) // the load runs on its own for a while

	// The holder's command runs longer than the renew deadline: it keeps
	// the lease only by renewing through another replica.
	holder := locktest.Start(t, bin.Leasehold, lockArgs(holderConfig, "exclusive", dir, "3s", "holder")...)
	locktest.WaitFor(t, time.Minute, "the holder's command to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "holder"))
		return err == nil
	})
	d.replicas[0].Kill(t)
	t.Logf("killed replica %s under the holder", d.replicas[0].Name())
	holderCode, err := holder.Code(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	switch holderCode {
	case 0:
		t.Log("the holder kept the lease")
	case lock.ExitLost:
		t.Log("the holder lost the lease cleanly")
	default:
		t.Errorf("the holder exited with %d, want 0 or %d\nstderr:\n%s", holderCode, lock.ExitLost, holder.Stderr)
	}
	if n := dials(holderLB); n < 2 {
		t.Errorf("the holder's balancer dialed %d times: the holder did not reconnect after its replica died", n)
	}
	time.Sleep(phaseTime)
	d.replicas[0].Restart(t)
	t.Logf("restarted replica %s", d.replicas[0].Name())
	time.Sleep(phaseTime)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for code, n := range codes {
		if code != 0 && code != lock.ExitLost {
			t.Errorf("%d commands exited with %d (99: two at once)", n, code)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	var tokens []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("token %q: %v", f, err)
		}
		tokens = append(tokens, n)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d after %d: not strictly increasing", tokens[i], tokens[i-1])
		}
	}
	t.Logf("%d commands ran: the holder's, and others with exit codes %v; tokens %d to %d", len(tokens), codes, tokens[0], tokens[len(tokens)-1])
}

// dials is how many connections to replicas b has tried.
func dials(b *balancer) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next
}

// balancedKubeconfig writes the shared admin kubeconfig with url as the
// server, as the deployment guide's clients use the load balancer.
func balancedKubeconfig(t testing.TB, d *deployment, url string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(filepath.Join(d.replicas[0].DataDir(), "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = url
	}
	path := filepath.Join(t.TempDir(), "lb.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
