//go:build unix

package lock_test

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lock"
	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

// elect starts `leasehold elect` on the lease "web" with the fast election
// flags and args.
func (e *env) elect(args ...string) *locktest.Proc {
	e.t.Helper()
	all := append([]string{"elect", "--kubeconfig", e.srv.Kubeconfig()}, locktest.Fast...)
	return locktest.Start(e.t, e.bin.Leasehold, append(append(all, "web"), args...)...)
}

// leaders are the non-empty leaders of text output lines, with repeats
// (there should be none) kept.
func leaders(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// jsonLeaders parses JSON output lines.
func jsonLeaders(t *testing.T, lines []string) []lock.Event {
	t.Helper()
	var out []lock.Event
	for _, l := range lines {
		var ev lock.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}

// TestElect: two candidates and an observer print each change of leader;
// when the leader is interrupted it releases the lease, and the other
// candidate takes over at once.
func TestElect(t *testing.T) {
	e := newEnv(t)
	observer := e.elect("--observe", "-o", "json")
	a := e.elect("--identity", "a")
	locktest.WaitFor(t, 30*time.Second, "a to lead", func() bool { return slices.Equal(a.Stdout.Lines(), []string{"a"}) })
	b := e.elect("--identity", "b", "-o", "json")
	locktest.WaitFor(t, 30*time.Second, "b to see a lead", func() bool { return len(b.Stdout.Lines()) == 1 })
	if evs := jsonLeaders(t, b.Stdout.Lines()); evs[0].Leader != "a" || evs[0].Leading == nil || *evs[0].Leading || evs[0].Lease != "default/web" {
		t.Errorf("b's first line %+v, want a leading", evs[0])
	}
	locktest.WaitFor(t, 30*time.Second, "the observer to see a lead", func() bool { return len(observer.Stdout.Lines()) == 1 })

	interrupted := time.Now()
	a.Signal(t, syscall.SIGINT)
	if code, _ := a.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("a exited with %d", code)
	}
	if got := a.Stdout.Lines(); !slices.Equal(got, []string{"a", ""}) {
		t.Errorf("a printed %q, want a, then no leader once it released the lease", got)
	}
	var tookOver time.Duration
	locktest.WaitFor(t, 30*time.Second, "b to lead", func() bool {
		evs := jsonLeaders(t, b.Stdout.Lines())
		last := evs[len(evs)-1]
		if last.Leader == "b" && last.Leading != nil && *last.Leading {
			tookOver = last.Time.Sub(interrupted)
			return true
		}
		return false
	})
	if tookOver >= locktest.LeaseDuration {
		t.Errorf("b led %v after a was interrupted: a did not release the lease", tookOver)
	}
	t.Logf("b led %v after a was interrupted", tookOver.Round(time.Millisecond))
	locktest.WaitFor(t, 30*time.Second, "the observer to see b lead", func() bool {
		evs := jsonLeaders(t, observer.Stdout.Lines())
		return evs[len(evs)-1].Leader == "b"
	})
	var seen []string
	for _, ev := range jsonLeaders(t, observer.Stdout.Lines()) {
		if ev.Leading != nil {
			t.Errorf("observer line %+v says whether it leads", ev)
		}
		seen = append(seen, ev.Leader)
	}
	// The observer may or may not see the lease free between a and b.
	if !slices.Equal(seen, []string{"a", "", "b"}) && !slices.Equal(seen, []string{"a", "b"}) {
		t.Errorf("the observer saw %q", seen)
	}
	var bs []string
	for _, ev := range jsonLeaders(t, b.Stdout.Lines()) {
		bs = append(bs, ev.Leader)
	}
	if got := leaders(bs); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("b saw leaders %q, want a then b", bs)
	}

	b.Signal(t, syscall.SIGTERM)
	if code, _ := b.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("b exited with %d", code)
	}
	observer.Signal(t, syscall.SIGTERM)
	if code, _ := observer.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("the observer exited with %d", code)
	}
}

// TestElectStopReason: when the server goes away under a leader, elect
// says why it stopped leading: no renewal for the renew deadline, and the
// last error.
func TestElectStopReason(t *testing.T) {
	e := newEnv(t)
	a := e.elect("--identity", "a")
	locktest.WaitFor(t, 30*time.Second, "a to lead", func() bool { return slices.Equal(a.Stdout.Lines(), []string{"a"}) })
	e.srv.Stop()
	var line string
	locktest.WaitFor(t, 30*time.Second, "a to stop leading", func() bool {
		for _, l := range strings.Split(a.Stderr.String(), "\n") {
			if strings.Contains(l, "stopped leading") {
				line = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(line, `reason="no renewal succeeded for the renew deadline (2s); last error: `) {
		t.Errorf("a logged %s", line)
	}
	t.Log(line)
}
