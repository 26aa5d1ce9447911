package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/leasehold/leasehold/internal/controllers/leaseexpiry"
	"github.com/leasehold/leasehold/internal/controllers/registrations"
	"github.com/leasehold/leasehold/internal/lock"
)

const registerUsage = `Usage: leasehold register [flags] SERVICE ADDRESS:PORT [-- COMMAND [ARG...]]

Registers ADDRESS:PORT as an endpoint of SERVICE for as long as it runs:
it holds a registration Lease (SERVICE-ADDRESS-PORT in the namespace),
which the server turns into an endpoint of SERVICE's EndpointSlices
while it is renewed. On SIGTERM or SIGINT, or when COMMAND exits, it
deletes the Lease and the endpoint leaves at once; if it is killed, the
endpoint leaves when the Lease expires (--lease-duration), and the server
deletes the Lease then.

With COMMAND, it runs COMMAND, passes SIGTERM and SIGINT on to it, and
exits with its exit code. More in the manual's docs/discovery.md.

Flags:
`

// registerFlags are register's settings.
type registerFlags struct {
	clientFlags
	leaseDuration, retryPeriod time.Duration
	portName, protocol, zone   string
	hostname, identity         string
	logLevel                   string
}

func registerCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, registerUsage); fs.PrintDefaults() }
	var f registerFlags
	f.clientFlags.register(fs)
	fs.DurationVar(&f.leaseDuration, "lease-duration", 10*time.Second, "how long the endpoint stays after the last renewal (whole seconds)")
	fs.DurationVar(&f.retryPeriod, "retry-period", 0, "time between renewals (default: 2/15 of --lease-duration, client-go's ratio)")
	fs.StringVar(&f.portName, "port-name", "", "name of the port (a DNS label; empty: unnamed)")
	fs.StringVar(&f.protocol, "protocol", "TCP", "protocol of the port: TCP, UDP or SCTP")
	fs.StringVar(&f.zone, "zone", "", "zone of the endpoint")
	fs.StringVar(&f.hostname, "hostname", "", "hostname of the endpoint")
	fs.StringVar(&f.identity, "identity", "", "holder identity prefix (default: the host name), a random suffix added")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	failed := func(err error) error { return &ExitError{Code: lock.ExitFailed, Err: err} }

	before, command, _ := cutArgs(args, "--")
	positional, err := parseInterleaved(fs, before, false)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return failed(err)
	}
	if len(positional) != 2 {
		fs.Usage()
		return failed(errors.New("want SERVICE and ADDRESS:PORT"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return failed(fmt.Errorf("--log-level: %w", err))
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	lease, err := f.lease(positional[0], positional[1])
	if err != nil {
		return failed(err)
	}
	if f.retryPeriod <= 0 {
		f.retryPeriod = f.leaseDuration * 2 / 15
	}
	cs, ns, err := f.client("leasehold-register", max(f.leaseDuration/3, time.Second))
	if err != nil {
		return failed(err)
	}
	lease.Namespace = ns
	r := &registrar{leases: cs.CoordinationV1().Leases(ns), want: lease, retry: f.retryPeriod, log: log.With("lease", ns+"/"+lease.Name)}

	// Signals end the registration (and go to the command); main's
	// context ends on them too, but the command must get them first.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if err := r.register(ctx); err != nil {
		if lock.Refused(err) {
			return &ExitError{Code: lock.ExitRefused, Err: lock.RefusedError(err, "create, get, update and delete on leases.coordination.k8s.io", ns)}
		}
		return &ExitError{Code: lock.ExitUnreachable, Err: err}
	}
	code := r.hold(context.WithoutCancel(ctx), command, sigs)
	if err := r.deregister(); err != nil {
		log.Warn("could not delete the registration; it ends when the lease expires", "err", err)
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// lease builds the registration Lease of service at addrPort.
func (f *registerFlags) lease(service, addrPort string) (*coordinationv1.Lease, error) {
	if errs := validation.IsDNS1123Label(service); len(errs) > 0 {
		return nil, fmt.Errorf("service %q: %s", service, errs[0])
	}
	host, port, err := net.SplitHostPort(addrPort)
	if err != nil {
		return nil, fmt.Errorf("%q: want ADDRESS:PORT ([IPv6]:PORT for IPv6): %w", addrPort, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("%q is no IP address", host)
	}
	if f.leaseDuration < time.Second || f.leaseDuration%time.Second != 0 {
		return nil, fmt.Errorf("--lease-duration %v: must be a whole number of seconds, at least 1s", f.leaseDuration)
	}
	ports := f.portName + ":" + port + "/" + strings.ToUpper(f.protocol)
	if _, _, err := registrations.ParsePorts(ports); err != nil {
		return nil, err
	}
	if f.portName != "" {
		if errs := validation.IsDNS1123Label(f.portName); len(errs) > 0 {
			return nil, fmt.Errorf("--port-name %q: %s", f.portName, errs[0])
		}
	}
	id, err := lock.NewIdentity(f.identity)
	if err != nil {
		return nil, err
	}
	secs := int32(f.leaseDuration / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   leaseName(service, host, port),
			Labels: map[string]string{registrations.LabelService: service},
			Annotations: map[string]string{
				registrations.AnnotationAddresses: net.ParseIP(host).String(),
				registrations.AnnotationPorts:     ports,
				leaseexpiry.Annotation:            "0s",
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs},
	}
	if f.zone != "" {
		l.Annotations[registrations.AnnotationZone] = f.zone
	}
	if f.hostname != "" {
		l.Annotations[registrations.AnnotationHostname] = f.hostname
	}
	return l, nil
}

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// leaseName is SERVICE-ADDRESS-PORT, the address's dots and colons as
// dashes.
func leaseName(service, host, port string) string {
	return strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(service+"-"+host+"-"+port), "-"), "-")
}

// registrar holds one registration Lease.
type registrar struct {
	leases coordinationv1client.LeaseInterface
	want   *coordinationv1.Lease
	retry  time.Duration
	log    *slog.Logger
	cur    *coordinationv1.Lease
}

// register creates the Lease, or takes over one of the same name (a
// registration of this address left by an earlier process).
func (r *registrar) register(ctx context.Context) error {
	now := metav1.NowMicro()
	l := r.want.DeepCopy()
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	deadline := time.Now().Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	for {
		out, err := r.leases.Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *coordinationv1.Lease
			if cur, err = r.leases.Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
				upd := l.DeepCopy()
				upd.ResourceVersion = cur.ResourceVersion
				out, err = r.leases.Update(ctx, upd, metav1.UpdateOptions{})
			}
		}
		if err == nil {
			r.cur = out
			r.log.Info("registered")
			return nil
		}
		if lock.Refused(err) {
			return err // registerCmd says what was refused
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("registering: %w", err)
		}
		r.log.Warn("registering failed; trying again", "err", err)
		time.Sleep(r.retry)
	}
}

// hold renews the Lease until a signal comes or the command exits, and
// returns the exit code.
func (r *registrar) hold(ctx context.Context, command []string, sigs <-chan os.Signal) int {
	var done chan int
	var cmd *exec.Cmd
	if len(command) > 0 {
		cmd = exec.Command(command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			r.log.Error("could not run the command", "err", err)
			if errors.Is(err, exec.ErrNotFound) {
				return lock.ExitNotFound
			}
			return lock.ExitCannotRun
		}
		done = make(chan int, 1)
		go func() {
			err := cmd.Wait()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
				if code < 0 {
					code = 128 + 9 // killed by a signal
				}
			}
			done <- code
		}()
	}
	ticker := time.NewTicker(r.retry)
	defer ticker.Stop()
	for {
		select {
		case sig := <-sigs:
			if cmd == nil {
				r.log.Info("deregistering", "signal", sig.String())
				return 0
			}
			_ = cmd.Process.Signal(sig)
		case code := <-done:
			return code
		case <-ticker.C:
			r.renew(ctx)
		}
	}
}

func (r *registrar) renew(ctx context.Context) {
	l := r.cur.DeepCopy()
	now := metav1.NowMicro()
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = r.want.Spec.HolderIdentity
	out, err := r.leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Changed or deleted by someone else: take it again.
		if err = r.register(ctx); err == nil {
			return
		}
	}
	if err != nil {
		r.log.Warn("renewing failed", "err", err)
		return
	}
	r.cur = out
}

// deregister deletes the Lease as this process holds it.
func (r *registrar) deregister() error {
	if r.cur == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	uid := r.cur.UID
	err := r.leases.Delete(ctx, r.cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
