package lock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// guard is a small process that leads the command's process group and
// kills the whole group with SIGKILL when leasehold lock dies, however it
// dies (SIGKILL included): it waits on a pipe whose only write end
// leasehold lock holds, and the kernel closes that end when leasehold
// lock exits. A pipe rather than PR_SET_PDEATHSIG on the guard: it does
// not depend on which thread started the guard, and a signal that kills
// the guard could not let it kill the group first.
//
// As the group's leader the guard also keeps the group id from being
// reused while the group is drained. It ignores the signals the group is
// sent; it dies only of SIGKILL, with the group.
type guard struct {
	cmd *exec.Cmd
	// w is the guard's stdin. Writing 'r' to it releases the guard: it
	// exits without killing. EOF (leasehold lock is gone) fires it.
	w *os.File
}

// guardSignals are the signals the guard ignores: those the group is
// sent (forwarded ones, SIGTERM when the lease is lost) and terminal ones.
var guardSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE}

// RunGuard is the guard's program (see Config.Guard): it reports ready on
// out, then waits on in; EOF kills its process group, a release byte
// ends it quietly.
func RunGuard(in io.Reader, out io.Writer) error {
	signal.Ignore(guardSignals...)
	if _, err := io.WriteString(out, "ready\n"); err != nil {
		return err
	}
	var b [1]byte
	if n, _ := in.Read(b[:]); n == 1 && b[0] == 'r' {
		return nil
	}
	return syscall.Kill(0, syscall.SIGKILL)
}

// startGuard starts argv as the guard, in a process group of its own,
// and waits until it is ready.
func startGuard(argv []string) (*guard, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil, err
	}
	defer ready.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, readyW, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	readyW.Close() // the guard's copy is the only one left: EOF if it dies
	if err != nil {
		w.Close()
		return nil, err
	}
	g := &guard{cmd: cmd, w: w}
	_ = ready.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(ready).ReadString('\n')
	if err == nil && line != "ready\n" {
		err = fmt.Errorf("it said %q", line)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		g.release()
		return nil, fmt.Errorf("%w %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return g, nil
}

// pid is the guard's pid, the id of the command's process group; 0 for
// no guard.
func (g *guard) pid() int {
	if g == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// release stands the guard down and waits for it to exit; call it once
// the group is drained. A nil guard does nothing.
func (g *guard) release() {
	if g == nil {
		return
	}
	// EPIPE if the guard died with the group's SIGKILL: it is gone anyway.
	if _, err := g.w.Write([]byte{'r'}); err != nil && !errors.Is(err, syscall.EPIPE) {
		_ = g.cmd.Process.Kill()
	}
	g.w.Close()
	_ = g.cmd.Wait()
}
