// Command leasehold serves the Kubernetes API of leader election and
// service discovery without a control plane: Leases, LeaseCandidates,
// Endpoints, EndpointSlices, Namespaces, Events and RBAC, with /metrics, a
// live view (/ui/) and a garbage collector. Its lock, elect and register
// commands are clients of that API; bench load-tests a server. See
// README.md and docs/.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/internal/cli"
)

func main() {
	// Every request gets a random audit ID: drawing their bytes 256 at a
	// time saves an allocation and a read of the system's generator each.
	// Set before any goroutine can draw one, as uuid requires.
	uuid.EnableRandPool()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		code := 1
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			code = exit.Code // leasehold lock exits with its command's code
		}
		if exit == nil || exit.Err != nil {
			fmt.Fprintln(os.Stderr, "leasehold:", err)
		}
		os.Exit(code)
	}
}
