package lock

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// dieWithParent has the kernel SIGKILL the command when the thread that
// started it ends (PR_SET_PDEATHSIG), so that a leasehold lock killed with
// SIGKILL takes its command with it. The command is started and waited for
// from a goroutine locked to its thread (child.go), which ends only after
// the command did. It kills only the command itself, not the processes it
// started: the guard (guard_linux.go) kills the rest of its group. Kept as
// well, for a guard that someone else killed.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// groupAlive reports whether a process other than a zombie, and other
// than except (the guard), is left in the group pgid. Zombies do not
// count: orphans are reaped by init (or a subreaper), which some container
// inits do only every few seconds.
func groupAlive(pgid, except int) bool {
	if !groupExists(pgid) {
		return false
	}
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range dir {
		if pid, err := strconv.Atoi(e.Name()); err != nil || pid == except {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp ...", where comm may hold spaces
		// and parentheses: the fields start after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 || string(f[2]) != strconv.Itoa(pgid) {
			continue
		}
		if state := f[0][0]; state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}
