//go:build !unix

package cli

import "os"

// forwardedSignals are the signals leasehold lock passes on to its
// command.
var forwardedSignals = []os.Signal{os.Interrupt}

// swallowedSignals: none outside unix.
var swallowedSignals []os.Signal
