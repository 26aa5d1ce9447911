package lock

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// child is the command, running in a process group of its own: the
// guard's, or without a guard one whose id is the command's pid.
type child struct {
	cmd *exec.Cmd
	// pgid is the process group; guard the guard's pid (0: none), which
	// does not count as a process left in the group.
	pgid, guard int
	// done is closed when the command has exited and been waited for;
	// then state is its exit state.
	done  chan struct{}
	state *os.ProcessState
}

// startChild starts cmd in g's process group (its own if g is nil) and
// waits for it in a goroutine locked to its OS thread, for dieWithParent.
func startChild(cmd *exec.Cmd, g *guard) (*child, error) {
	setProcAttr(cmd, g.pid())
	c := &child{cmd: cmd, guard: g.pid(), done: make(chan struct{})}
	started := make(chan error, 1) // one value, never blocks
	go func() {
		defer close(c.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pgid = c.guard
		if c.pgid == 0 {
			c.pgid = cmd.Process.Pid
		}
		started <- nil
		_ = cmd.Wait() // its error says what ProcessState says
		c.state = cmd.ProcessState
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// signal sends sig to the command's process group.
func (c *child) signal(sig os.Signal) error {
	return signalGroup(c.pgid, sig)
}

// exitCode is the command's exit code; call it after done is closed.
func (c *child) exitCode() int { return exitCode(c.state) }

// drain ends what the command left running in its process group after it
// exited: SIGTERM, then SIGKILL at killAt, and gives up (reporting false)
// if processes remain a second after that (in uninterruptible sleep, or
// zombies where they cannot be told apart: outside Linux).
func (c *child) drain(killAt time.Time) bool {
	pgid := c.pgid
	if !groupAlive(pgid, c.guard) {
		return true
	}
	_ = signalGroup(pgid, syscall.SIGTERM)
	killed := false
	for {
		if !groupAlive(pgid, c.guard) {
			return true
		}
		now := time.Now()
		switch {
		case !killed && !now.Before(killAt):
			_ = signalGroup(pgid, syscall.SIGKILL)
			killed = true
		case killed && now.After(killAt.Add(time.Second)):
			return false
		}
		time.Sleep(20 * time.Millisecond) // no notification exists for another process's exit
	}
}

// startCode is the exit code for a command that could not be started, as
// the shell's.
func startCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitCannotRun
}
