//go:build !linux

package etcdtest

import (
	"os"
	"os/exec"
)

// dieWithParent is a no-op outside Linux: an etcd started by a test binary
// that dies without cleaning up keeps running there.
func dieWithParent(*exec.Cmd) {}

// lockFile does not lock outside Linux: test binaries building etcd at the
// same time may race there.
func lockFile(string) (func(), error) { return func() {}, nil }

// alive cannot tell outside Linux; it says yes, so nothing is reaped.
func alive(pid int) bool {
	_, err := os.FindProcess(pid)
	return err == nil
}
