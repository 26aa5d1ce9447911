//go:build unix

package cli

import (
	"os"
	"syscall"
)

// forwardedSignals are the signals leasehold lock passes on to its
// command: those that ask a process to stop, reload or report.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
