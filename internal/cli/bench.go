package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/leasehold/leasehold/internal/bench"
)

const benchUsage = `Usage: leasehold bench <scenario> [flags]

Scenarios (each drives a running server through its API):
  fill     create leader-election-shaped leases
  list     time whole and paginated lists of them
  renew    renew them as fast as holders can
  fanout   many watchers of one large Endpoints object being updated
  overload writes offered faster than the server sustains: how it sheds them
  storm    lease renewals paced as holders renew them, during an event storm
  mirror   Endpoints mirrored into EndpointSlices: how long, how much memory, a burst
  registrations  make filled leases registrations of one service; their slices
  gc       leases owned by others: the collector's memory, and how fast it deletes them
  heartbeat  node leases renewed as kubelets renew them: does the server keep up

Run "leasehold bench <scenario> -h" for its flags; the manual's
docs/performance.md has what they measured and how.
`

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return fmt.Errorf("no scenario given")
	}
	fs := flag.NewFlagSet("bench "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "./leasehold-data/admin.kubeconfig", "kubeconfig of the server under test; several, comma-separated, spread the clients over replicas")
	pids := fs.String("server-pid", "", "pid of the server process, or several comma-separated (kube-apiserver's and etcd's, to compare), to report their CPU and memory (Linux)")
	namespace := fs.String("namespace", "default", "namespace to work in")
	var run func(e *bench.Env) error
	switch args[0] {
	case "fill":
		n := fs.Int("leases", 20000, "leases to create")
		clients := fs.Int("clients", 64, "parallel clients")
		run = func(e *bench.Env) error { return bench.Fill(ctx, e, *namespace, *n, *clients) }
	case "list":
		page := fs.Int("page-size", 500, "page size of paginated lists")
		rounds := fs.Int("rounds", 10, "repetitions")
		run = func(e *bench.Env) error { return bench.List(ctx, e, *namespace, *page, *rounds) }
	case "renew":
		n := fs.Int("leases", 1000, "leases to renew: lease-000000 on, created by fill first (renew does not create them)")
		clients := fs.Int("clients", 64, "parallel holders")
		d := fs.Duration("duration", 10*time.Second, "how long to renew")
		read := fs.Bool("read", false, "read each lease before renewing it (GET + PUT, as client-go's leader election renews)")
		run = func(e *bench.Env) error { return bench.Renew(ctx, e, *namespace, *n, *clients, *d, *read) }
	case "fanout":
		var fc bench.FanoutConfig
		fs.IntVar(&fc.Watchers, "watchers", 1000, "watchers, each on its own connection")
		fs.IntVar(&fc.Addresses, "addresses", 1000, "addresses in the Endpoints object")
		fs.Float64Var(&fc.Rate, "rate", 2, "updates per second")
		fs.DurationVar(&fc.Duration, "duration", 30*time.Second, "how long to update")
		fs.BoolVar(&fc.Protobuf, "protobuf", false, "watch in protobuf, as Kubernetes components do (default JSON)")
		run = func(e *bench.Env) error { fc.Namespace = *namespace; return bench.Fanout(ctx, e, fc) }
	case "overload":
		oc := bench.OverloadConfig{Duration: time.Minute}
		fs.IntVar(&oc.Leases, "leases", 1000, "leases to renew (created by fill)")
		fs.Float64Var(&oc.Rate, "rate", 25000, "writes offered per second, whatever the answers")
		fs.IntVar(&oc.Connections, "connections", 64, "client connections")
		fs.DurationVar(&oc.Duration, "duration", time.Minute, "how long to offer them")
		fs.StringVar(&oc.Token, "token", "", "bearer token of a user outside system:masters (whose requests are never refused), from the server's --token-auth-file")
		fs.IntVar(&oc.StreamsPerConnection, "streams-per-connection", 200, "requests waiting for an answer on one connection at most (below the server's 250 streams); more are counted as not sent")
		run = func(e *bench.Env) error { oc.Namespace = *namespace; return bench.Overload(ctx, e, oc) }
	case "storm":
		sc := bench.StormConfig{}
		fs.IntVar(&sc.Leases, "leases", 200, "leases renewed, each by a holder of its own (created by fill)")
		fs.DurationVar(&sc.RenewInterval, "renew-interval", 2*time.Second, "time between a holder's renewals (client-go's retry period)")
		fs.IntVar(&sc.Clients, "clients", 16, "connections the holders share")
		fs.StringVar(&sc.EventNamespace, "event-namespace", "storm", "namespace of the storm's events (created if missing)")
		fs.Float64Var(&sc.EventsPerSecond, "events-per-second", 200, "events created per second, each with a reason of its own (0: no storm, the baseline)")
		fs.IntVar(&sc.EventClients, "event-clients", 8, "connections the storm's events go through")
		fs.DurationVar(&sc.Duration, "duration", time.Minute, "how long to renew (and storm)")
		fs.StringVar(&sc.DataDir, "data-dir", "", "the server's data directory, to report the size of its store")
		fs.DurationVar(&sc.WaitExpiry, "wait-expiry", 0, "after the storm, wait at most this long for the server to expire the events (--event-ttl), and report the sizes again")
		fs.DurationVar(&sc.Settle, "settle", time.Minute, "with --wait-expiry, how long to wait after the last event expired before reporting")
		run = func(e *bench.Env) error { sc.Namespace = *namespace; return bench.Storm(ctx, e, sc) }
	case "mirror":
		mc := bench.MirrorConfig{}
		fs.IntVar(&mc.Endpoints, "endpoints", 10000, "Endpoints to create (ep-NNNNNN), each mirrored to a slice")
		fs.IntVar(&mc.Addresses, "addresses", 10, "addresses of each Endpoints")
		fs.IntVar(&mc.Burst, "burst", 1000, "Endpoints updated at once after they are all mirrored")
		fs.IntVar(&mc.Clients, "clients", 32, "parallel clients")
		run = func(e *bench.Env) error { mc.Namespace = *namespace; return bench.Mirror(ctx, e, mc) }
	case "registrations":
		n := fs.Int("leases", 10000, "leases to make registrations (created by fill, and renewed held by the renew or storm scenarios)")
		clients := fs.Int("clients", 32, "parallel clients")
		run = func(e *bench.Env) error { return bench.Registrations(ctx, e, *namespace, *n, *clients) }
	case "gc":
		gc := bench.GCConfig{}
		fs.IntVar(&gc.Dependents, "dependents", 100000, "dependent Leases to create (gc-dep-NNNNNN)")
		fs.IntVar(&gc.PerOwner, "per-owner", 100, "dependents of each owner Lease (gc-owner-NNNNNN)")
		fs.IntVar(&gc.Clients, "clients", 32, "parallel clients")
		run = func(e *bench.Env) error { gc.Namespace = *namespace; return bench.GC(ctx, e, gc) }
	case "heartbeat":
		hc := bench.HeartbeatConfig{}
		fs.IntVar(&hc.Nodes, "nodes", 50000, "nodes, each renewing its Lease node-NNNNNN (created first when missing)")
		fs.DurationVar(&hc.Period, "period", 10*time.Second, "how often each node renews (the kubelet's 10 s)")
		fs.DurationVar(&hc.Duration, "duration", time.Minute, "how long to measure the renewals")
		fs.DurationVar(&hc.Warmup, "warmup", 10*time.Second, "how long to renew before measuring (the first seconds after creating a fleet's leases are slower)")
		fs.IntVar(&hc.Conns, "connections", 16, "HTTP/2 connections the nodes share")
		fs.IntVar(&hc.InFlight, "in-flight", 256, "requests waiting for an answer at once, at most")
		fs.BoolVar(&hc.JSON, "json", false, "speak JSON (default protobuf, as kubelets do)")
		run = func(e *bench.Env) error {
			hc.Namespace = "kube-node-lease" // where kubelets renew, unless --namespace says otherwise
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "namespace" {
					hc.Namespace = *namespace
				}
			})
			return bench.Heartbeat(ctx, e, hc)
		}
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return nil
	default:
		fmt.Fprint(stderr, benchUsage)
		return fmt.Errorf("unknown scenario %q", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // as serve -h: help asked for is not an error
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			if v <= 0 {
				bad = append(bad, "--"+f.Name)
			}
		case float64:
			if v < 0 || v == 0 && f.Name != "events-per-second" {
				bad = append(bad, "--"+f.Name)
			}
		case time.Duration:
			if v < 0 || v == 0 && f.Name != "wait-expiry" && f.Name != "warmup" {
				bad = append(bad, "--"+f.Name)
			}
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%s must be positive", strings.Join(bad, ", "))
	}
	serverPIDs, err := parsePIDs(*pids)
	if err != nil {
		return err
	}
	e, err := bench.NewEnv(*kubeconfig, serverPIDs, stdout)
	if err != nil {
		return err
	}
	// Progress goes to stderr, redrawn in place on a terminal and as a
	// line every 10 s otherwise, so that stdout keeps only the results.
	e.Progress = stderr
	e.Live = isTerminal(stderr)
	return run(e)
}

// parsePIDs parses --server-pid: pids separated by commas.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("--server-pid: %q is not a process id", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
