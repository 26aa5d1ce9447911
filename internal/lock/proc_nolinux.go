//go:build unix && !linux

package lock

import "syscall"

// dieWithParent does nothing outside Linux: there is no PR_SET_PDEATHSIG,
// and a command (with its process group) outlives a leasehold lock killed
// with SIGKILL.
func dieWithParent(*syscall.SysProcAttr) {}

// groupAlive reports whether any process is left in the group pgid; a
// zombie its new parent has not yet reaped counts. There is no guard
// (except) outside Linux.
func groupAlive(pgid, except int) bool { return groupExists(pgid) }
