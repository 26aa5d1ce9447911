//go:build !linux

package multi

import "os/exec"

// dieWithParent is a no-op outside Linux: replicas of a test binary that
// dies without cleaning up keep running there.
func dieWithParent(*exec.Cmd) {}
