package multi

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the thread that
// started it ends (PR_SET_PDEATHSIG); the caller starts it from a
// goroutine locked to its thread for the life of the process, so a test
// binary that dies takes its replicas with it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
