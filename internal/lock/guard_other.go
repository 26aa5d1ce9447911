//go:build !linux

package lock

import (
	"errors"
	"io"
)

// Outside Linux there is no guard: a leasehold lock killed with SIGKILL
// leaves its command's process group running (see dieWithParent).

type guard struct{}

// RunGuard fails: there is no guard outside Linux.
func RunGuard(io.Reader, io.Writer) error { return errors.New("the guard runs only on Linux") }

func startGuard([]string) (*guard, error) { return nil, nil }

func (*guard) pid() int { return 0 }

func (*guard) release() {}
