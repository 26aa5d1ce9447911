package lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// The command's environment gets these variables.
const (
	// EnvToken is the fencing token: the lease's leaseTransitions as this
	// acquisition wrote it.
	EnvToken = "LEASEHOLD_FENCING_TOKEN"
	// EnvLease is the lease, as namespace/name.
	EnvLease = "LEASEHOLD_LEASE"
	// EnvIdentity is the holder identity written to the lease.
	EnvIdentity = "LEASEHOLD_IDENTITY"
)

// DefaultKillAfter is how long a command gets between SIGTERM and SIGKILL
// by default.
const DefaultKillAfter = 10 * time.Second

// Config is what Run needs.
type Config struct {
	Election
	// Command is the command and its arguments; Command[0] is looked up
	// in $PATH before waiting for the lease.
	Command []string
	// Env is the command's environment (nil: this process's), to which Run
	// adds EnvToken, EnvLease and EnvIdentity.
	Env []string
	// Stdin, Stdout and Stderr are the command's; *os.File values are
	// passed to it as they are. A nil Stdin is the null device.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Timeout bounds the wait for the lease, counted from the call (so it
	// includes reaching the server); 0 waits as long as it takes.
	Timeout time.Duration
	// KillAfter is how long the command's process group has between
	// SIGTERM and SIGKILL when the lease is lost or ctx ends; less when
	// the lease would expire sooner (see killBy).
	KillAfter time.Duration
	// Signals received while the command runs are sent to its process
	// group; one received while waiting for the lease ends the wait (exit
	// code 128+N). May be nil.
	Signals <-chan os.Signal
	// Guard, on Linux, is the command line of a program that calls
	// RunGuard, such as {"/proc/self/exe", GuardCommand} for a program
	// that dispatches GuardCommand to it. It leads the command's process
	// group and kills it if this process dies. Nil: no guard, and a
	// process killed with SIGKILL leaves all but the command itself
	// running.
	Guard []string
}

// GuardCommand is the argument the leasehold binary runs RunGuard for.
const GuardCommand = "lock-guard"

// Run waits for the lease, runs the command while holding it, and releases
// it when the command's process group is gone. It returns the exit code
// `leasehold lock` exits with: the command's (128+N if signal N killed it),
// or one of the Exit codes, with an error saying why.
//
// When the lease is lost while the command runs (another holder in a
// read, the lease deleted, or no renewal for the renew deadline), the
// process group gets SIGTERM at once and SIGKILL after KillAfter, or
// sooner: no later than killBy, before any other client can see the lease
// expire. When ctx ends while the command runs, the command is stopped the
// same way and its exit code returned; before, Run stops waiting and
// returns ctx's error.
func Run(ctx context.Context, cfg Config) (int, error) {
	if err := cfg.validate(true); err != nil {
		return ExitFailed, err
	}
	if len(cfg.Command) == 0 {
		return ExitFailed, errors.New("no command given")
	}
	if cfg.KillAfter < 0 {
		return ExitFailed, fmt.Errorf("--kill-after %v: must not be negative", cfg.KillAfter)
	}
	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		return startCode(err), err
	}
	cfg.Logger = cfg.Logger.With("lease", cfg.Lease())
	// client-go gives up renewing at most RetryPeriod + RenewDeadline after
	// the last success; killBy may come up to a second before the last
	// success's lease duration ends when renewals are less than a second
	// apart.
	failBy := cfg.RetryPeriod + cfg.RenewDeadline
	if cfg.RetryPeriod < time.Second {
		failBy += time.Second
	}
	if failBy >= cfg.LeaseDuration-killMargin(cfg.LeaseDuration) {
		cfg.Logger.Warn("when renewing fails, the command may be killed without a SIGTERM first: --lease-duration leaves no time after --retry-period + --renew-deadline",
			"lease-duration", cfg.LeaseDuration, "renew-deadline", cfg.RenewDeadline, "retry-period", cfg.RetryPeriod)
	}
	s := &supervisor{cfg: cfg, path: path, log: cfg.Logger}
	// Started before the wait, so that it costs no time once the lease is
	// acquired; released after the command's group is drained.
	g, err := startGuard(cfg.Guard)
	if err != nil {
		return ExitFailed, fmt.Errorf("starting the guard of the command's process group: %w", err)
	}
	defer g.release()
	s.guard = g
	if cfg.Timeout > 0 {
		s.deadline = time.Now().Add(cfg.Timeout)
	}
	if code, err := s.reach(ctx); err != nil {
		return code, err
	}
	return s.run(ctx)
}

// killMargin is how long before the lease's expiry (as other clients can
// compute it) the command's process group is killed when no renewal
// succeeded: a tenth of the lease duration, at most a second, for this
// process's scheduling and the kernel's killing.
func killMargin(leaseDuration time.Duration) time.Duration {
	return min(leaseDuration/10, time.Second)
}

type supervisor struct {
	cfg  Config
	path string
	log  *slog.Logger
	// deadline ends the wait for the lease (zero: none).
	deadline time.Time
	// guard leads the command's process group; nil: none.
	guard *guard
}

// reach checks that the server answers (Election.reach) before the wait,
// within the deadline, and gives up on a signal.
func (s *supervisor) reach(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !s.deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, s.deadline)
		defer cancel()
	}
	done := make(chan error, 1) // one value, never blocks
	go func() { done <- s.cfg.reach(ctx, false) }()
	select {
	case err := <-done:
		if Refused(err) {
			return ExitRefused, RefusedError(err, needsToCampaign, s.cfg.Namespace)
		}
		if err != nil {
			return ExitUnreachable, fmt.Errorf("could not reach the server: %w", err)
		}
		return 0, nil
	case sig := <-s.cfg.Signals:
		cancel()
		<-done
		return signalCode(sig), fmt.Errorf("%v while reaching the server", sig)
	}
}

func (s *supervisor) run(ctx context.Context) (int, error) {
	fl := newFencedLock(s.cfg.leaseLock(), s.log, 0, nil)
	acquired := make(chan struct{}, 1) // the elector leads at most once; never blocks
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            fl,
		LeaseDuration:   s.cfg.LeaseDuration,
		RenewDeadline:   s.cfg.RenewDeadline,
		RetryPeriod:     s.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            s.cfg.Lease(),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { acquired <- struct{}{} },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return ExitFailed, err
	}
	// The elector outlives ctx: after ctx ends the command still has to be
	// stopped before the lease is released.
	electCtx, stopElecting := context.WithCancel(s.cfg.electorContext(context.WithoutCancel(ctx)))
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electCtx)
	}()
	// Stopping the elector releases the lease, if fencedLock allows.
	defer func() {
		stopElecting()
		<-electorDone
		switch st := fl.state(); {
		case !st.acquired:
		case st.holder == "":
			s.log.Info("released the lease")
		case st.holder == s.cfg.Identity:
			s.log.Warn("could not release the lease; it expires by itself", "at", st.expires)
		default:
			s.log.Info("the lease is another's", "holder", st.holder)
		}
	}()

	s.log.Info("waiting for the lease", "identity", s.cfg.Identity)
	if code, err := s.wait(ctx, fl, acquired); err != nil {
		return code, err
	}
	if !fl.beginCommand() {
		return ExitLost, fmt.Errorf("lost the lease before the command started: %s", fl.state().lostReason)
	}
	c, err := s.start(fl.state().token)
	if err != nil {
		fl.endCommand()
		return startCode(err), err
	}
	code, err := s.supervise(ctx, fl, c, electorDone)
	if !c.drain(s.killAt(fl, time.Now())) {
		s.log.Warn("processes of the command's process group are left after SIGKILL")
	}
	fl.endCommand()
	return code, err
}

// wait waits for the lease; a nil error means it is acquired.
func (s *supervisor) wait(ctx context.Context, fl *fencedLock, acquired <-chan struct{}) (int, error) {
	var timeout <-chan time.Time
	if !s.deadline.IsZero() {
		t := time.NewTimer(time.Until(s.deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-acquired:
		return 0, nil
	case err := <-fl.fatal:
		return fatalCode(err, s.cfg.Namespace)
	case <-timeout:
		return ExitTimeout, fmt.Errorf("timed out after %v waiting for lease %s (held by %q)", s.cfg.Timeout, s.cfg.Lease(), fl.state().holder)
	case sig := <-s.cfg.Signals:
		return signalCode(sig), fmt.Errorf("%v while waiting for the lease", sig)
	case <-ctx.Done():
		return ExitFailed, ctx.Err()
	}
}

func (s *supervisor) start(token int) (*child, error) {
	cmd := exec.Command(s.path, s.cfg.Command[1:]...)
	cmd.Args[0] = s.cfg.Command[0]
	env := s.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	// Later values win in exec.Cmd.Env: these replace inherited ones.
	cmd.Env = append(env[:len(env):len(env)],
		EnvToken+"="+strconv.Itoa(token),
		EnvLease+"="+s.cfg.Lease(),
		EnvIdentity+"="+s.cfg.Identity,
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr
	c, err := startChild(cmd, s.guard)
	if err != nil {
		return nil, err
	}
	s.log.Info("running the command", "pid", cmd.Process.Pid, "token", token)
	return c, nil
}

// killAt is when a process group told to stop at now gets SIGKILL.
func (s *supervisor) killAt(fl *fencedLock, now time.Time) time.Time {
	return minTime(now.Add(s.cfg.KillAfter), s.killBy(fl))
}

// killBy is when the command's process group must be dead if no renewal
// succeeds meanwhile: killMargin before the earliest time another client
// can see the lease expire (fencedLock's state.expires). With renewals
// less than a second apart that is up to a second before the last
// renewal's send time plus the lease duration: client-go's candidates
// compare records with times to the second
// (https://github.com/kubernetes/client-go/blob/v0.37.2/tools/leaderelection/leaderelection.go,
// tryAcquireOrRenew and setObservedRecord).
func (s *supervisor) killBy(fl *fencedLock) time.Time {
	return fl.state().expires.Add(-killMargin(s.cfg.LeaseDuration))
}

// supervise waits for the command to exit while watching the lease.
func (s *supervisor) supervise(ctx context.Context, fl *fencedLock, c *child, electorDone <-chan struct{}) (int, error) {
	var lost string
	var killTimer *time.Timer
	var killC <-chan time.Time
	// stop sends SIGTERM, once, and arms the SIGKILL.
	stop := func() {
		if killTimer != nil {
			return
		}
		_ = c.signal(syscall.SIGTERM)
		killTimer = time.NewTimer(time.Until(s.killAt(fl, time.Now())))
		killC = killTimer.C
	}
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
	killed := false
	kill := func(why string) {
		if killed {
			return
		}
		killed = true
		s.log.Warn("killing the command's process group", "why", why)
		_ = c.signal(syscall.SIGKILL)
	}
	lose := func(reason string) {
		if lost != "" {
			return
		}
		lost = reason
		s.log.Warn("lost the lease; stopping the command", "reason", reason)
		stop()
	}
	expiry := time.NewTimer(time.Until(s.killBy(fl)))
	defer expiry.Stop()
	lostC, expiryC, ctxDone := fl.lost, expiry.C, ctx.Done()
	for {
		select {
		case <-c.done:
			if lost != "" {
				return ExitLost, fmt.Errorf("lost the lease while the command ran (%s); the command exited with %d", lost, c.exitCode())
			}
			return c.exitCode(), nil
		case <-lostC:
			lostC = nil
			lose(fl.state().lostReason)
		case <-electorDone:
			electorDone = nil
			lose("renewing failed past the renew deadline")
		case <-expiryC:
			if d := time.Until(s.killBy(fl)); d > 0 {
				expiry.Reset(d)
				continue
			}
			expiryC = nil
			lose("no renewal succeeded and the lease is about to expire")
			kill("the lease is about to expire")
		case <-killC:
			killC = nil
			if time.Now().Before(s.killBy(fl)) {
				kill(fmt.Sprintf("still running %v after SIGTERM", s.cfg.KillAfter))
			} else {
				kill("the lease is about to expire")
			}
		case sig := <-s.cfg.Signals:
			s.log.Debug("forwarding a signal to the command", "signal", sig)
			if err := c.signal(sig); err != nil {
				s.log.Warn("could not forward a signal", "signal", sig, "err", err)
			}
		case <-ctxDone:
			ctxDone = nil
			stop()
		}
	}
}

// fatalCode is the exit code and error for err from fencedLock.fatal.
func fatalCode(err error, namespace string) (int, error) {
	if Refused(err) {
		return ExitRefused, fmt.Errorf("cannot acquire the lease: %w", RefusedError(err, needsToCampaign, namespace))
	}
	return ExitFailed, fmt.Errorf("cannot acquire the lease: %w", err)
}

// signalCode is the exit code of a process killed by sig: 128+N.
func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return ExitFailed
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
