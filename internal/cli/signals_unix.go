//go:build unix

package cli

import (
	"os"
	"syscall"
)

// forwardedSignals are the signals leasehold lock passes on to its
// command: those that ask a process to stop, reload or report.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// swallowedSignals are caught and dropped by leasehold lock: Ctrl-Z
// (SIGTSTP) would stop it, and with it the renewals, while its command,
// in a process group of its own, runs on. (Caught rather than ignored, so
// that the command does not inherit the ignoring.)
var swallowedSignals = []os.Signal{syscall.SIGTSTP}
