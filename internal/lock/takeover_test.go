//go:build unix

package lock_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

// MeasureTakeoverEnv names the environment variable that turns on
// TestMeasureTakeover and says how many runs it makes.
const MeasureTakeoverEnv = "LEASEHOLD_MEASURE_TAKEOVER"

// TestMeasureTakeover measures, with the default election flags (15 s /
// 10 s / 2 s), how long after a `leasehold lock` holder is killed with
// SIGKILL a waiter on the same lease starts its command, and how long
// after the holder's last renewal (the lease's renewTime, read after the
// kill). The runs go in parallel, one lease each. A measurement, not a
// check: it runs only when asked, e.g.
//
//	LEASEHOLD_MEASURE_TAKEOVER=10 go test -run TestMeasureTakeover -v ./internal/lock
func TestMeasureTakeover(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(MeasureTakeoverEnv))
	if n <= 0 {
		t.Skipf("a measurement of about 25 s; set $%s to the number of runs", MeasureTakeoverEnv)
	}
	e := newEnv(t)
	var mu sync.Mutex // guards afterKill, afterRenew
	var afterKill, afterRenew []time.Duration
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("takeover-%d", i)
			args := func(dir string) []string {
				return []string{"lock", "--kubeconfig", e.srv.Kubeconfig(), "--log-level", "info", name, "--", e.bin.Child, "wait", dir}
			}
			holderDir, waiterDir := t.TempDir(), t.TempDir()
			holder := locktest.Start(t, e.bin.Leasehold, args(holderDir)...)
			locktest.WaitFor(t, time.Minute, "the holder's command", func() bool { return exists(holderDir + "/started") })
			waiter := locktest.Start(t, e.bin.Leasehold, args(waiterDir)...)
			locktest.WaitFor(t, time.Minute, "the waiter to wait", func() bool {
				return strings.Contains(waiter.Stderr.String(), "waiting for the lease")
			})
			// Kill at a random point of the renewal cycle: each run
			// waits a different time after the waiter started.
			time.Sleep(3*time.Second + time.Duration(i)*2*time.Second/time.Duration(n))
			killed := time.Now()
			if err := syscall.Kill(holder.Pid(), syscall.SIGKILL); err != nil {
				t.Error(err)
				return
			}
			renewed := e.lease(name).Spec.RenewTime.Time
			locktest.WaitFor(t, time.Minute, "the waiter's command", func() bool { return exists(waiterDir + "/started") })
			started := waiterStarted(t, waiter)
			waiter.Signal(t, syscall.SIGTERM)
			<-waiter.Done()
			mu.Lock()
			defer mu.Unlock()
			afterKill = append(afterKill, started.Sub(killed))
			afterRenew = append(afterRenew, started.Sub(renewed))
			t.Logf("%s: killed %v after the last renewal; the waiter started %v after the kill, %v after the last renewal",
				name, killed.Sub(renewed).Round(10*time.Millisecond), started.Sub(killed).Round(10*time.Millisecond), started.Sub(renewed).Round(10*time.Millisecond))
		})
	}
	wg.Wait()
	slices.Sort(afterKill)
	slices.Sort(afterRenew)
	if len(afterKill) > 0 {
		t.Logf("%d runs: the waiter started %v–%v after the kill, %v–%v after the last renewal", len(afterKill),
			afterKill[0].Round(100*time.Millisecond), afterKill[len(afterKill)-1].Round(100*time.Millisecond),
			afterRenew[0].Round(100*time.Millisecond), afterRenew[len(afterRenew)-1].Round(100*time.Millisecond))
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
