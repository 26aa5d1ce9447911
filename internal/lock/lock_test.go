//go:build unix

package lock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/lock"
	"github.com/leasehold/leasehold/internal/testkit/locktest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	locktest.Cleanup()
	os.Exit(code)
}

// env is one test's server and binaries.
type env struct {
	t      *testing.T
	bin    locktest.Binaries
	srv    *testserver.Server
	client kubernetes.Interface
}

func newEnv(t *testing.T) *env {
	t.Helper()
	bin := locktest.Build(t)
	srv := testserver.Start(t)
	return &env{t: t, bin: bin, srv: srv, client: srv.Client(t)}
}

// lock starts `leasehold lock` with the test server's kubeconfig, the
// fast election flags, flags, the lease name and the child's arguments.
func (e *env) lock(name string, flags []string, child ...string) *locktest.Proc {
	e.t.Helper()
	args := append([]string{"lock", "--kubeconfig", e.srv.Kubeconfig(), "--log-level", "info"}, locktest.Fast...)
	args = append(append(append(args, flags...), name, "--", e.bin.Child), child...)
	return locktest.Start(e.t, e.bin.Leasehold, args...)
}

func (e *env) lease(name string) *coordinationv1.Lease {
	e.t.Helper()
	l, err := e.client.CoordinationV1().Leases("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// TestLockExcludes runs three `leasehold lock` processes in a loop on one
// lease: their commands never run at once (each takes an flock, which the
// kernel drops however the command ends, and fails if it is taken), every
// command exits 0, and the fencing tokens, in the order the commands ran,
// strictly increase.
func TestLockExcludes(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	const workers, rounds = 3, 10
	var wg sync.WaitGroup
	var mu sync.Mutex // guards codes
	codes := map[int]int{}
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range rounds {
				p := e.lock("excl", nil, "exclusive", dir, "20ms")
				code, err := p.Code(time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[0] != workers*rounds {
		t.Errorf("exit codes %v, want %d × 0 (99: two commands at once)", codes, workers*rounds)
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
	if len(tokens) != workers*rounds {
		t.Errorf("%d tokens, want %d", len(tokens), workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d after %d: not strictly increasing: %v", tokens[i], tokens[i-1], tokens)
			break
		}
	}
	if l := e.lease("excl"); holder(l) != "" || int(ptr.Deref(l.Spec.LeaseTransitions, 0)) != tokens[len(tokens)-1] {
		t.Errorf("lease at the end: holder %q, transitions %d; want released, %d", holder(l), ptr.Deref(l.Spec.LeaseTransitions, 0), tokens[len(tokens)-1])
	}
	t.Logf("%d rounds in %v, tokens %v", workers*rounds, time.Since(start).Round(time.Millisecond), tokens)
}

// TestLockExitCode checks that the command's exit code comes back, and
// the codes of a command that does not run.
func TestLockExitCode(t *testing.T) {
	e := newEnv(t)
	notExecutable := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		command []string
		want    int
	}{
		{"zero", []string{e.bin.Child, "exit", "0"}, 0},
		{"seven", []string{e.bin.Child, "exit", "7"}, 7},
		{"killed", []string{e.bin.Child, "kill-self"}, 128 + int(syscall.SIGKILL)},
		{"not found", []string{"no-such-command-here"}, lock.ExitNotFound},
		{"not executable", []string{notExecutable}, lock.ExitCannotRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"lock", "--kubeconfig", e.srv.Kubeconfig()}, locktest.Fast...)
			args = append(append(args, "codes", "--"), tc.command...)
			p := locktest.Start(t, e.bin.Leasehold, args...)
			if code, _ := p.Wait(t, 30*time.Second); code != tc.want {
				t.Errorf("exit code %d, want %d", code, tc.want)
			}
		})
	}
}

// TestLockTakenAway takes the lease away from a running command with a
// merge patch of holderIdentity, as `kubectl patch` would: the command
// gets SIGTERM within the lease duration, leasehold lock exits with
// ExitLost, and it leaves the new holder's lease alone.
func TestLockTakenAway(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	p := e.lock("taken", []string{"--kill-after=10s"}, "wait", dir)
	st := locktest.WaitStarted(t, dir, 30*time.Second)
	l := e.lease("taken")
	if holder(l) != st.Identity || strconv.Itoa(int(ptr.Deref(l.Spec.LeaseTransitions, -1))) != st.Token {
		t.Fatalf("lease holder %q transitions %d; the command has identity %q, token %s", holder(l), ptr.Deref(l.Spec.LeaseTransitions, -1), st.Identity, st.Token)
	}
	if st.Lease != "default/taken" || !strings.HasPrefix(st.Identity, mustHostname(t)+"_") {
		t.Errorf("LEASEHOLD_LEASE %q, LEASEHOLD_IDENTITY %q", st.Lease, st.Identity)
	}
	patched := time.Now()
	patch := []byte(`{"spec":{"holderIdentity":"intruder"}}`)
	if _, err := e.client.CoordinationV1().Leases("default").Patch(context.Background(), "taken", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, exited := p.Wait(t, 30*time.Second)
	if code != lock.ExitLost {
		t.Errorf("exit code %d, want %d", code, lock.ExitLost)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "signal")); string(b) != "terminated" {
		t.Errorf("the command got %q, want SIGTERM", b)
	}
	if d := exited.Sub(patched); d > locktest.LeaseDuration {
		t.Errorf("the command stopped %v after the lease was taken, more than the lease duration %v", d, locktest.LeaseDuration)
	} else {
		t.Logf("the command stopped %v after the lease was taken", d.Round(time.Millisecond))
	}
	if h := holder(e.lease("taken")); h != "intruder" {
		t.Errorf("holder %q after leasehold lock exited, want intruder's lease left alone", h)
	}
}

// TestLockKillAfter: a command that ignores SIGTERM is killed, with its
// process group, --kill-after after the lease was lost.
func TestLockKillAfter(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	p := e.lock("stubborn", []string{"--kill-after=300ms"}, "stubborn", dir)
	st := locktest.WaitStarted(t, dir, 30*time.Second)
	patch := []byte(`{"spec":{"holderIdentity":"intruder"}}`)
	if _, err := e.client.CoordinationV1().Leases("default").Patch(context.Background(), "stubborn", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Wait(t, 30*time.Second); code != lock.ExitLost {
		t.Errorf("exit code %d, want %d", code, lock.ExitLost)
	}
	for _, pid := range []int{st.Pid, st.Grandchild} {
		locktest.WaitFor(t, 5*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool { return locktest.Gone(pid) })
	}
}

// TestLockKilledTree kills leasehold lock with SIGKILL while its command
// runs with a grandchild in its process group (a script's `sleep 60 &`),
// which shares the command's flock, and a second leasehold lock waits: the
// grandchild must be gone well within the lease duration, and so before
// the waiter's command runs (which fails, exit 99, if the flock is still
// held).
func TestLockKilledTree(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	holder := e.lock("tree", nil, "tree", dir)
	st := locktest.WaitStarted(t, dir, 30*time.Second)
	pgid, err := syscall.Getpgid(st.Pid)
	if err != nil {
		t.Fatal(err)
	}
	waiter := e.lock("tree", nil, "exclusive", dir, "0s")
	locktest.WaitFor(t, 30*time.Second, "the second lock to wait", func() bool {
		return strings.Contains(waiter.Stderr.String(), "waiting for the lease")
	})
	killed := time.Now()
	holder.Signal(t, syscall.SIGKILL)
	const bound = time.Second // a quarter of the lease duration
	for _, pid := range []int{st.Grandchild, st.Pid, pgid} {
		locktest.WaitFor(t, bound, fmt.Sprintf("process %d to be gone", pid), func() bool { return locktest.Gone(pid) })
	}
	t.Logf("the command's process group (leader %d) was gone %v after leasehold lock was killed", pgid, time.Since(killed).Round(time.Millisecond))
	if code, _ := waiter.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("the waiter's command exited with %d (99: the grandchild still held the flock)", code)
	}
}

// TestLockOutlivesNoLease stops the server under a command that ignores
// SIGTERM, with a --kill-after longer than the lease: renewing fails, and
// the command's process group is killed before the lease could expire,
// counted from the last moment a renewal could have succeeded.
func TestLockOutlivesNoLease(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	p := e.lock("noserver", []string{"--kill-after=1m"}, "stubborn", dir)
	st := locktest.WaitStarted(t, dir, 30*time.Second)
	e.srv.Stop()
	stopped := time.Now()
	code, exited := p.Wait(t, 30*time.Second)
	if code != lock.ExitLost {
		t.Errorf("exit code %d, want %d", code, lock.ExitLost)
	}
	for _, pid := range []int{st.Pid, st.Grandchild} {
		if !locktest.Gone(pid) {
			t.Errorf("process %d still runs after leasehold lock exited", pid)
		}
	}
	killed := logTime(t, p.Stderr.String(), "killing the command's process group")
	if d := killed.Sub(stopped); d >= locktest.LeaseDuration {
		t.Errorf("the command was killed %v after the server stopped, not before the lease could expire (%v)", d, locktest.LeaseDuration)
	} else {
		t.Logf("the command was killed %v after the server stopped; leasehold lock exited after %v", d.Round(time.Millisecond), exited.Sub(stopped).Round(time.Millisecond))
	}
}

// logTime is the time of the first line of slog text output log that
// holds msg.
func logTime(t *testing.T, log, msg string) time.Time {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		return at
	}
	t.Fatalf("no %q in the log:\n%s", msg, log)
	return time.Time{}
}

// TestLockInterrupt sends SIGINT to leasehold lock while a second one
// waits: the command gets the SIGINT, its exit code comes back, and the
// lease is released so that the waiter runs at once. A SIGTSTP before does
// not stop leasehold lock.
func TestLockInterrupt(t *testing.T) {
	e := newEnv(t)
	dir1, dir2 := t.TempDir(), t.TempDir()
	p1 := e.lock("int", nil, "wait", dir1)
	st1 := locktest.WaitStarted(t, dir1, 30*time.Second)
	p2 := e.lock("int", nil, "wait", dir2)
	locktest.WaitFor(t, 30*time.Second, "the second lock to wait", func() bool {
		return strings.Contains(p2.Stderr.String(), "waiting for the lease")
	})
	// Ctrl-Z first: were leasehold lock to stop, the SIGINT would wait.
	p1.Signal(t, syscall.SIGTSTP)
	interrupted := time.Now()
	p1.Signal(t, syscall.SIGINT)
	if code, _ := p1.Wait(t, 30*time.Second); code != 42 {
		t.Errorf("exit code %d, want the command's 42", code)
	}
	if b, _ := os.ReadFile(filepath.Join(dir1, "signal")); string(b) != "interrupt" {
		t.Errorf("the command got %q, want SIGINT", b)
	}
	if h := holder(e.lease("int")); h == st1.Identity {
		t.Errorf("the lease is still %q's after it exited", h)
	}
	st2 := locktest.WaitStarted(t, dir2, 30*time.Second)
	handover := st2.At.Sub(interrupted)
	// Without the release, the waiter would have to let the lease expire.
	if handover >= locktest.LeaseDuration {
		t.Errorf("the waiter started %v after SIGINT, not before the lease could expire", handover)
	}
	t.Logf("the waiter started %v after SIGINT", handover.Round(time.Millisecond))
	if n1, n2 := atoi(t, st1.Token), atoi(t, st2.Token); n2 <= n1 {
		t.Errorf("tokens %d then %d", n1, n2)
	}
	p2.Signal(t, syscall.SIGTERM)
	if code, _ := p2.Wait(t, 30*time.Second); code != 43 {
		t.Errorf("exit code %d, want the command's 43", code)
	}
}

// TestLockTimeout: --timeout on a lease another holds exits with
// ExitTimeout, without running the command.
func TestLockTimeout(t *testing.T) {
	e := newEnv(t)
	now := metav1.NowMicro()
	_, err := e.client.CoordinationV1().Leases("default").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("someone-else"),
			LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := e.lock("held", []string{"--timeout=500ms"}, "wait", dir)
	code, exited := p.Wait(t, 30*time.Second)
	if code != lock.ExitTimeout {
		t.Errorf("exit code %d, want %d", code, lock.ExitTimeout)
	}
	if d := exited.Sub(p.Started()); d < 500*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
		t.Error("the command ran")
	}
	if !strings.Contains(p.Stderr.String(), `held by "someone-else"`) {
		t.Errorf("stderr does not name the holder:\n%s", p.Stderr)
	}
}

// TestLockUnreachable: a server that does not answer is ExitUnreachable.
func TestLockUnreachable(t *testing.T) {
	e := newEnv(t)
	e.srv.Stop()
	args := append([]string{"lock", "--kubeconfig", e.srv.Kubeconfig()}, locktest.Fast...)
	p := locktest.Start(t, e.bin.Leasehold, append(args, "x", "--", e.bin.Child, "exit", "0")...)
	if code, _ := p.Wait(t, 30*time.Second); code != lock.ExitUnreachable {
		t.Errorf("exit code %d, want %d", code, lock.ExitUnreachable)
	}
}

// TestHelp: both commands answer -h with exit code 0.
func TestHelp(t *testing.T) {
	bin := locktest.Build(t)
	for _, cmd := range []string{"lock", "elect"} {
		p := locktest.Start(t, bin.Leasehold, cmd, "-h")
		if code, _ := p.Wait(t, 30*time.Second); code != 0 {
			t.Errorf("%s -h: exit code %d", cmd, code)
		}
		if !strings.Contains(p.Stderr.String(), "Usage: leasehold "+cmd) {
			t.Errorf("%s -h:\n%s", cmd, p.Stderr)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustHostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLockPartition cuts the holder off from the server, silently, while a
// second leasehold lock waits: the holder's command, which ignores
// SIGTERM, must be dead before the waiter's command starts (the waiter's
// would fail to take the flock otherwise), although --kill-after is a
// minute.
func TestLockPartition(t *testing.T) {
	e := newEnv(t)
	proxy := locktest.StartProxy(t, strings.TrimPrefix(e.srv.URL(), "https://"))
	kc, err := clientcmd.LoadFromFile(e.srv.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + proxy.Addr()
	}
	proxied := filepath.Join(t.TempDir(), "proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, proxied); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := append([]string{"lock", "--kubeconfig", proxied, "--log-level", "info", "--kill-after=1m"}, locktest.Fast...)
	holder := locktest.Start(t, e.bin.Leasehold, append(args, "part", "--", e.bin.Child, "hold", dir)...)
	st := locktest.WaitStarted(t, dir, 30*time.Second)
	waiter := e.lock("part", nil, "exclusive", dir, "0s")
	locktest.WaitFor(t, 30*time.Second, "the second lock to wait", func() bool {
		return strings.Contains(waiter.Stderr.String(), "waiting for the lease")
	})
	proxy.Cut()
	cut := time.Now()
	if code, _ := waiter.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("the waiter's command exited with %d (99: the holder's command still ran)", code)
	}
	if code, _ := holder.Wait(t, 30*time.Second); code != lock.ExitLost {
		t.Errorf("the holder exited with %d, want %d", code, lock.ExitLost)
	}
	if !locktest.Gone(st.Pid) {
		t.Errorf("the holder's command %d still runs", st.Pid)
	}
	killed := logTime(t, holder.Stderr.String(), "killing the command's process group")
	tokens, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	if n := atoi(t, strings.TrimSpace(string(tokens))); n <= atoi(t, st.Token) {
		t.Errorf("the waiter's token %d, the holder's %s", n, st.Token)
	}
	t.Logf("after the cut: the holder's command was killed after %v, the waiter's ran after %v",
		killed.Sub(cut).Round(time.Millisecond), waiterStarted(t, waiter).Sub(cut).Round(time.Millisecond))
}

// waiterStarted is when leasehold lock logged that it runs its command.
func waiterStarted(t *testing.T, p *locktest.Proc) time.Time {
	t.Helper()
	return logTime(t, p.Stderr.String(), "running the command")
}

// TestLockLeaseDurationAlone: --lease-duration 3s alone scales the renew
// deadline and retry period from it (2 s, 400 ms), in client-go's ratio,
// instead of refusing because the default 10 s deadline is longer; a
// deadline given explicitly is still checked against it.
func TestLockLeaseDurationAlone(t *testing.T) {
	e := newEnv(t)
	p := locktest.Start(t, e.bin.Leasehold, "lock", "--kubeconfig", e.srv.Kubeconfig(), "--lease-duration", "3s", "short", "--", e.bin.Child, "exit", "0")
	if code, _ := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	p = locktest.Start(t, e.bin.Leasehold, "lock", "--kubeconfig", e.srv.Kubeconfig(), "--lease-duration", "3s", "--renew-deadline", "5s", "short", "--", e.bin.Child, "exit", "0")
	if code, _ := p.Wait(t, 30*time.Second); code != lock.ExitFailed {
		t.Errorf("--renew-deadline 5s longer than --lease-duration 3s: exit code %d, want %d", code, lock.ExitFailed)
	}
}
