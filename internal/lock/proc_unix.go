//go:build unix

package lock

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr starts the command in the process group pgid (0: a group of
// its own), so that signals reach everything it starts (a shell script's
// children too).
func setProcAttr(cmd *exec.Cmd, pgid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	dieWithParent(cmd.SysProcAttr)
}

// signalGroup sends sig to the process group pgid; a group that no longer
// exists is not an error.
func signalGroup(pgid int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return errors.New("not a unix signal: " + sig.String())
	}
	err := syscall.Kill(-pgid, s)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// groupExists reports whether any process, zombies included, is left in
// the group pgid.
func groupExists(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// exitCode is the command's exit status as a shell reports it: 128+N when
// signal N killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
