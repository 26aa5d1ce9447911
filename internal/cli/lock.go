package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/lock"
)

// ExitError asks the program to exit with Code; Err, if not nil, says why
// (and is printed).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

const lockUsage = `Usage: leasehold lock [flags] NAME -- COMMAND [ARG...]

Waits for the Lease NAME, runs COMMAND while holding it, and releases it
when COMMAND exits. Works against any Kubernetes API server; finds it as
kubectl does. More in the manual's docs/lock.md.

COMMAND runs in a process group of its own, with these in its environment:
  LEASEHOLD_FENCING_TOKEN  the lease's leaseTransitions as this acquisition
                           wrote it: larger for every acquisition of the lease
  LEASEHOLD_LEASE          NAMESPACE/NAME
  LEASEHOLD_IDENTITY       the holder identity, unique to this process

Signals sent to leasehold lock go to COMMAND's process group. If the lease is
lost, the group gets SIGTERM at once and SIGKILL after --kill-after, or
sooner so that it never outlives the lease. On Linux, if leasehold lock dies
(of SIGKILL too), the group is killed.

Exit status: COMMAND's (128+N if signal N killed it), or
  121  could not reach the server
  122  lost the lease while COMMAND ran
  123  the server refused the credentials (401) or the permission (403)
  124  --timeout passed before the lease was acquired
  125  leasehold lock itself failed (flags, kubeconfig, missing namespace...)
  126  COMMAND could not be started; 127 COMMAND was not found
  128+N  signal N arrived while waiting for the lease

Flags:
`

const electUsage = `Usage: leasehold elect [flags] NAME

Campaigns for the Lease NAME with client-go's leader election and prints the
leader's identity each time it changes, one line each (an empty line: no
leader known), until interrupted; then releases the lease if it leads. With
--observe, only watches the lease. Exit status 121 and 125 as lock's.
More in the manual's docs/lock.md.

Exit status: 0 when interrupted, or 121, 123 or 125 as leasehold lock's.

Flags:
`

// clientFlags are kubectl's flags for finding the server.
type clientFlags struct {
	kubeconfig, context, namespace string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config, as kubectl)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the lease (default: the context's, or default)")
	fs.StringVar(&c.namespace, "n", "", "short for --namespace")
}

// clientConfig finds the kubeconfig with client-go's loading rules, as
// kubectl does.
func (c *clientFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
}

// client loads the REST config with client-go's loading rules, as kubectl
// does, and returns a clientset whose requests time out after timeout,
// and the namespace.
func (c *clientFlags) client(userAgent string, timeout time.Duration) (kubernetes.Interface, string, error) {
	cc := c.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	cfg = rest.AddUserAgent(cfg, userAgent)
	cfg.Timeout = timeout
	// The elector paces its own requests; client-side rate limiting would
	// only delay renewals.
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, ns, err
}

// electionFlags are the flags lock and elect share.
type electionFlags struct {
	clientFlags
	e        lock.Election
	logLevel string
	fs       *flag.FlagSet
	// events records the election's Events; nil when observing.
	events *lock.EventRecorder
}

func (f *electionFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	f.clientFlags.register(fs)
	fs.DurationVar(&f.e.LeaseDuration, "lease-duration", lock.DefaultLeaseDuration, "how long a lease lasts without renewal (whole seconds)")
	fs.DurationVar(&f.e.RenewDeadline, "renew-deadline", lock.DefaultRenewDeadline, "how long the holder retries renewing before it gives up the lease (given --lease-duration alone: 2/3 of it)")
	fs.DurationVar(&f.e.RetryPeriod, "retry-period", lock.DefaultRetryPeriod, "time between attempts to acquire or renew (given --lease-duration alone: 2/15 of it)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
}

// scaleDurations gives a renew deadline and a retry period not set on the
// command line the share of the lease duration client-go's defaults
// have (15 s, 10 s, 2 s), when the lease duration was set: --lease-duration
// 3s alone means a 2 s deadline and 400 ms retries, not a refusal because
// the default 10 s deadline is longer. Flags set explicitly stay, and are
// checked as given.
func scaleDurations(e *lock.Election, set map[string]bool) {
	if !set["lease-duration"] {
		return
	}
	// In seconds: durations multiplied by durations overflow.
	ratio := func(d time.Duration) time.Duration {
		return e.LeaseDuration * (d / time.Second) / (lock.DefaultLeaseDuration / time.Second)
	}
	if !set["renew-deadline"] {
		e.RenewDeadline = ratio(lock.DefaultRenewDeadline)
	}
	if !set["retry-period"] {
		e.RetryPeriod = ratio(lock.DefaultRetryPeriod)
	}
}

// complete fills in the election after parsing; campaign says whether it
// records Events (call flushEvents when done).
func (f *electionFlags) complete(name, userAgent string, campaign bool, stderr io.Writer) error {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	scaleDurations(&f.e, set)
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	f.e.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// Each request gets half the renew deadline (at least a second), as
	// client-go's resourcelock.NewFromKubeconfig gives its requests.
	cs, ns, err := f.client(userAgent, max(f.e.RenewDeadline/2, time.Second))
	if err != nil {
		return err
	}
	f.e.Leases, f.e.Namespace, f.e.Name = cs.CoordinationV1(), ns, name
	if campaign {
		f.events = lock.NewEventRecorder(cs.CoreV1(), userAgent, f.e.Logger)
		f.e.Events = f.events
	}
	return nil
}

// eventsFlushTimeout bounds the wait for the last Events at exit: a
// server that does not answer should not hold the exit up much.
const eventsFlushTimeout = 2 * time.Second

// flushEvents waits for the Events recorded to be written.
func (f *electionFlags) flushEvents() {
	if f.events == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventsFlushTimeout)
	defer cancel()
	f.events.Flush(ctx)
}

func lockCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, lockUsage); fs.PrintDefaults() }
	var f electionFlags
	f.register(fs)
	identity := fs.String("identity", "", `prefix of the holder identity, to which a random suffix is added (default: the host name)`)
	timeout := fs.Duration("timeout", 0, "give up waiting for the lease after this long (exit 124; 0: wait as long as it takes)")
	killAfter := fs.Duration("kill-after", lock.DefaultKillAfter, "time between SIGTERM and SIGKILL when the lease is lost")
	failed := func(err error) error { return &ExitError{Code: lock.ExitFailed, Err: err} }

	name, command, err := parseLockArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return failed(err)
	}
	id, err := lock.NewIdentity(*identity)
	if err != nil {
		return failed(err)
	}
	f.e.Identity = id
	if err := f.complete(name, "leasehold-lock", true, stderr); err != nil {
		return failed(err)
	}
	defer f.flushEvents()

	// Signals go to the command. main's context also ends on SIGINT and
	// SIGTERM: lock.Run gets one that does not, so that the command gets
	// the signal itself rather than SIGTERM from Run as well.
	sigs := make(chan os.Signal, 8) // os/signal drops signals that do not fit: 8 pending is plenty
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if len(swallowedSignals) > 0 {
		swallowed := make(chan os.Signal, 1) // never read: os/signal drops what does not fit
		signal.Notify(swallowed, swallowedSignals...)
		defer signal.Stop(swallowed)
	}
	code, err := lock.Run(context.WithoutCancel(ctx), lock.Config{
		Election:  f.e,
		Command:   command,
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		Timeout:   *timeout,
		KillAfter: *killAfter,
		Signals:   sigs,
		// This binary, even if replaced on disk meanwhile.
		Guard: []string{"/proc/self/exe", lock.GuardCommand},
	})
	if code == 0 && err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

func electCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("elect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, electUsage); fs.PrintDefaults() }
	var f electionFlags
	f.register(fs)
	identity := fs.String("identity", "", "holder identity; it must be unique among the candidates (default: the host name and a random suffix)")
	observe := fs.Bool("observe", false, "do not campaign; only watch the lease (needs list and watch on leases)")
	output := fs.String("o", "text", "output: text (the leader's identity) or json (one object a line)")
	positional, err := parseInterleaved(fs, args, false)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if len(positional) != 1 {
		fs.Usage()
		return errors.New("want one lease NAME")
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o %q: want text or json", *output)
	}
	f.e.Identity = *identity
	if f.e.Identity == "" && !*observe {
		if f.e.Identity, err = lock.NewIdentity(""); err != nil {
			return err
		}
	}
	if err := f.complete(positional[0], "leasehold-elect", !*observe, stderr); err != nil {
		return err
	}
	defer f.flushEvents()
	code, err := lock.Elect(ctx, lock.ElectConfig{Election: f.e, Observe: *observe, Out: stdout, JSON: *output == "json"})
	if code == 0 && err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// parseLockArgs parses lock's flags, which may come before and after NAME,
// and returns NAME and COMMAND, which follows "--" (or is the first
// argument after NAME that is not a flag, and everything after it).
func parseLockArgs(fs *flag.FlagSet, args []string) (name string, command []string, err error) {
	before, command, dashed := cutArgs(args, "--")
	positional, err := parseInterleaved(fs, before, !dashed)
	if err != nil {
		return "", nil, err
	}
	if !dashed && len(positional) > 1 {
		positional, command = positional[:1], positional[1:]
	}
	switch {
	case len(positional) != 1:
		fs.Usage()
		return "", nil, errors.New("want one lease NAME")
	case len(command) == 0:
		fs.Usage()
		return "", nil, errors.New("no COMMAND given")
	}
	return positional[0], command, nil
}

// cutArgs splits args at the first sep.
func cutArgs(args []string, sep string) (before, after []string, found bool) {
	i := slices.Index(args, sep)
	if i < 0 {
		return args, nil, false
	}
	return args[:i], args[i+1:], true
}

// parseInterleaved parses flags before and after positional arguments.
// With stopAfterFirst, parsing stops at the second positional argument,
// which is returned with everything after it.
func parseInterleaved(fs *flag.FlagSet, args []string, stopAfterFirst bool) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if stopAfterFirst && len(positional) == 1 {
			return append(positional, args...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
