package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Exit codes of `leasehold lock` besides the command's own, after
// coreutils timeout(1) and the shell: 124 timed out, 125 the tool itself
// failed, 126 and 127 the command could not run, 128+N a signal.
const (
	// ExitUnreachable: the server could not be reached (connection, TLS,
	// timeouts, 5xx) before the lease was acquired.
	ExitUnreachable = 121
	// ExitLost: the lease was lost while the command ran; the command was
	// signalled.
	ExitLost = 122
	// ExitRefused: the server refused the credentials (401) or the
	// permission (403) before the lease was acquired.
	ExitRefused = 123
	// ExitTimeout: --timeout passed before the lease was acquired.
	ExitTimeout = 124
	// ExitFailed: leasehold lock itself failed (flags, kubeconfig, the
	// namespace does not exist, ...).
	ExitFailed = 125
	// ExitCannotRun: the command was found but could not be started.
	ExitCannotRun = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)

// Client-go's defaults, which Kubernetes' own components use.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// needsToCampaign are the permissions on leases a campaign needs.
const needsToCampaign = "get, create and update on leases.coordination.k8s.io"

// Election is what Run and Elect share: the lease and the timing of the
// election.
type Election struct {
	// Leases is the client of the Lease API.
	Leases    coordinationv1client.LeasesGetter
	Namespace string
	Name      string
	// Identity is the holder identity written to the lease. Run needs one
	// no other process ever uses (see NewIdentity).
	Identity string
	// LeaseDuration (whole seconds, as the lease records it),
	// RenewDeadline and RetryPeriod are client-go's
	// LeaderElectionConfig's.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Events, if not nil, records client-go's Events on the lease
	// ("IDENTITY became leader", "IDENTITY stopped leading"), such as an
	// EventRecorder.
	Events resourcelock.EventRecorder
	// Logger receives this package's log and client-go's, the latter two
	// levels lower (client-go logs every failed attempt, which this package
	// already reports).
	Logger *slog.Logger
}

// Lease names the lease as namespace/name.
func (e *Election) Lease() string { return e.Namespace + "/" + e.Name }

// validate checks the election's fields; campaign says whether the
// identity is needed.
func (e *Election) validate(campaign bool) error {
	if campaign && e.Identity == "" {
		return errors.New("the identity must not be empty")
	}
	if e.Namespace == "" {
		return errors.New("no namespace")
	}
	if errs := validation.IsDNS1123Subdomain(e.Name); len(errs) > 0 {
		return fmt.Errorf("lease name %q: %s", e.Name, errs[0])
	}
	if e.LeaseDuration < time.Second || e.LeaseDuration%time.Second != 0 {
		return fmt.Errorf("--lease-duration %v: must be a whole number of seconds, at least 1s (the lease records seconds)", e.LeaseDuration)
	}
	// client-go's own rules (leaderelection.NewLeaderElector), said in
	// our flags' names.
	if e.RetryPeriod <= 0 {
		return fmt.Errorf("--retry-period %v: must be positive", e.RetryPeriod)
	}
	if e.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(e.RetryPeriod)) {
		return fmt.Errorf("--renew-deadline %v must be longer than %v × --retry-period %v", e.RenewDeadline, leaderelection.JitterFactor, e.RetryPeriod)
	}
	if e.LeaseDuration <= e.RenewDeadline {
		return fmt.Errorf("--lease-duration %v must be longer than --renew-deadline %v", e.LeaseDuration, e.RenewDeadline)
	}
	return nil
}

// leaseLock is client-go's LeaseLock for the election.
func (e *Election) leaseLock() *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     e.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity, EventRecorder: e.Events},
	}
}

// electorContext carries the logger client-go's leaderelection takes
// from its context.
func (e *Election) electorContext(ctx context.Context) context.Context {
	return klog.NewContext(ctx, clientGoLogger(e.Logger))
}

// clientGoLogger is a logr.Logger writing to log two slog levels lower
// than client-go asks for: its errors become Info, and the rest falls below
// Debug.
func clientGoLogger(log *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(lowered{log.Handler()})
}

type lowered struct{ slog.Handler }

// loweredBy is how much lowered lowers levels: two slog steps of 4.
const loweredBy = 8

func (h lowered) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l-loweredBy)
}

func (h lowered) Handle(ctx context.Context, r slog.Record) error {
	r.Level -= loweredBy
	// logr hands errors over without asking Enabled first.
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h lowered) WithAttrs(as []slog.Attr) slog.Handler { return lowered{h.Handler.WithAttrs(as)} }
func (h lowered) WithGroup(g string) slog.Handler       { return lowered{h.Handler.WithGroup(g)} }

// Refused reports whether err is the server refusing the credentials
// (401) or the permission (403): answers that retrying does not change.
func Refused(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)
}

// RefusedError says what the server refused, in its own words (a 403's
// message names the user, the verb, the resource and the namespace), and
// what the command needs: needs, such as "get, create and update on
// leases", in namespace.
func RefusedError(err error, needs, namespace string) error {
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("the server refused the credentials (401): %w", err)
	}
	return fmt.Errorf("the server refused permission (403): %w (this needs %s in namespace %q)", err, needs, namespace)
}

// reach reads the lease (with list, lists it) until the server answers,
// for up to the renew deadline, so that a server that cannot be reached
// is reported as such rather than waited for. A missing lease is an
// answer. 401 and 403 are final at once: check with Refused.
func (e *Election) reach(ctx context.Context, list bool) error {
	ctx, cancel := context.WithTimeout(ctx, e.RenewDeadline)
	defer cancel()
	start := time.Now()
	for {
		var err error
		if list {
			_, err = e.Leases.Leases(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + e.Name, Limit: 1})
		} else {
			_, err = e.Leases.Leases(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
		}
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case Refused(err):
			return err
		}
		e.Logger.Debug("the server does not answer yet", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (tried for %v)", err, time.Since(start).Round(time.Millisecond))
		case <-time.After(e.RetryPeriod):
		}
	}
}

// NewIdentity returns prefix (the host name if empty) followed by an
// underscore and 16 random hex digits: an identity no other process uses,
// as client-go's own examples make them.
func NewIdentity(prefix string) (string, error) {
	if prefix == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", err
		}
		prefix = h
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + "_" + hex.EncodeToString(b[:]), nil
}
