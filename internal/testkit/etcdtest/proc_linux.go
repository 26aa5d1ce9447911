package etcdtest

import (
	"os"
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the thread that
// started it ends (PR_SET_PDEATHSIG). The caller starts it from a goroutine
// locked to its thread for the life of the process, so that in effect the
// process dies with the test binary.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// lockFile takes an exclusive flock on path, creating it, and returns the
// function that releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// alive reports whether a process with this id exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
