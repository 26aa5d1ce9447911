//go:build !unix

package lock

import (
	"os"
	"os/exec"
)

// Outside unix there are no process groups: signals go to the command
// alone, and a terminating signal kills it.

func setProcAttr(*exec.Cmd, int) {}

func signalGroup(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if sig == os.Kill || sig == os.Interrupt {
		return p.Kill()
	}
	return p.Signal(sig)
}

func groupAlive(int, int) bool { return false }

func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }
