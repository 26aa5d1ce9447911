// Package locktest runs `leasehold lock` and `leasehold elect` as real
// processes for tests: it builds the leasehold binary and test/lockchild
// (the command the tests run under a lease) once per test binary, starts
// processes, and collects their output and exit codes. Only tests import
// it.
package locktest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit/testbin"
)

// Fast are election flags for tests: 4 s leases renewed every 100 ms, with
// a 2 s renew deadline (long enough for a loaded machine running a server
// under the race detector), leaving leasehold lock time to SIGTERM a
// command before it must kill it.
var Fast = []string{"--lease-duration=4s", "--renew-deadline=2s", "--retry-period=100ms"}

// LeaseDuration is Fast's lease duration.
const LeaseDuration = 4 * time.Second

// Binaries are the programs the tests run.
type Binaries struct {
	// Leasehold is cmd/leasehold; Child is test/lockchild.
	Leasehold, Child string
}

// Build returns the binaries, building them on first use.
func Build(t testing.TB) Binaries {
	t.Helper()
	var b Binaries
	var err error
	if b.Leasehold, err = testbin.Build(testbin.Leasehold); err == nil {
		b.Child, err = testbin.Build("github.com/leasehold/leasehold/test/lockchild")
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Cleanup removes the binaries, if they were built. TestMain calls it
// after the tests ran.
func Cleanup() { testbin.Cleanup() }

// Proc is a running leasehold process.
type Proc struct {
	name           string
	cmd            *exec.Cmd
	Stdout, Stderr *Buffer
	done           chan struct{} // closed when the process has exited
	started        time.Time
	exited         time.Time // valid once done is closed
}

// Start starts the leasehold binary with args; the process is killed when
// the test ends, and its output logged if the test failed. It may be
// called from any goroutine: if the process does not start, the test
// fails (t.Error) and Code reports an error.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{
		name:   strings.Join(args, " "),
		cmd:    exec.Command(bin, args...),
		Stdout: &Buffer{},
		Stderr: &Buffer{},
		done:   make(chan struct{}),
	}
	p.cmd.Stdout, p.cmd.Stderr = p.Stdout, p.Stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Errorf("starting leasehold %s: %v", p.name, err)
		close(p.done)
		return p
	}
	go func() {
		_ = p.cmd.Wait() // ProcessState says the rest
		p.exited = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // the test is over: whatever still runs goes
		<-p.done
		if t.Failed() {
			t.Logf("leasehold %s\nstdout:\n%s\nstderr:\n%s", p.name, p.Stdout, p.Stderr)
		}
	})
	return p
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Started is when the process was started.
func (p *Proc) Started() time.Time { return p.started }

// Pid is the process's pid.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code and when it exited; it fails the test (t.Fatal) if the process
// does not exit or dies of a signal.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) (int, time.Time) {
	t.Helper()
	code, err := p.Code(timeout)
	if err != nil {
		t.Fatal(err)
	}
	return code, p.exited
}

// Code waits up to timeout for the process to exit and returns its exit
// code; for use in goroutines other than the test's.
func (p *Proc) Code(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("leasehold %s still runs after %v\nstderr:\n%s", p.name, timeout, p.Stderr)
	}
	if p.cmd.ProcessState == nil {
		return 0, fmt.Errorf("leasehold %s did not start", p.name)
	}
	if !p.cmd.ProcessState.Exited() {
		return 0, fmt.Errorf("leasehold %s: %v\nstderr:\n%s", p.name, p.cmd.ProcessState, p.Stderr)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// Buffer collects a process's output; safe for one writer and readers.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines are the complete lines written so far.
func (b *Buffer) Lines() []string {
	s := b.String()
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(s[:i], "\n")
}

// WaitFor polls cond every 10 ms until it holds, failing the test with what
// when timeout passes first.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Started is what test/lockchild writes to DIR/started.
type Started struct {
	Token, Identity, Lease string
	Pid, Grandchild        int
	// At is when the file was first seen.
	At time.Time
}

// WaitStarted waits for DIR/started, for up to timeout.
func WaitStarted(t testing.TB, dir string, timeout time.Duration) Started {
	t.Helper()
	var s Started
	WaitFor(t, timeout, "the command to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "started"))
		if err != nil {
			return false
		}
		s.At = time.Now()
		f := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(f) != 5 {
			t.Fatalf("started: %q", b)
		}
		s.Token, s.Identity, s.Lease = f[0], f[1], f[2]
		if _, err := fmt.Sscan(f[3]+" "+f[4], &s.Pid, &s.Grandchild); err != nil {
			t.Fatalf("started: %q: %v", b, err)
		}
		return true
	})
	return s
}

// Proxy forwards TCP connections to a server until Cut, after which it
// forwards nothing and answers nothing, as a network partition would.
type Proxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed when the test ends

	mu  sync.Mutex // guards cut and ups
	cut bool
	ups map[net.Conn]bool // connections to the server

	wg sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port) on a loopback port; it
// stops when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, done: make(chan struct{}), ups: map[net.Conn]bool{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		close(p.done)
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes the connections to the server and forwards no more: clients
// keep their connections, and new ones are accepted, but nothing answers.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.ups {
		c.Close()
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer c.Close()
	// hold keeps a cut client's connection open, silent, until the test
	// ends.
	hold := func() {
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			<-p.done
		}
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		hold()
		return
	}
	p.ups[up] = true
	p.mu.Unlock()
	p.wg.Go(func() { _, _ = io.Copy(up, c) }) // ends when up or c is closed
	_, _ = io.Copy(c, up)
	up.Close()
	p.mu.Lock()
	delete(p.ups, up)
	p.mu.Unlock()
	hold()
}
