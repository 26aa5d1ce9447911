package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/leasehold/leasehold/internal/lock"
)

func TestLockArgs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		lease, ns string
		command   []string
	}{
		{name: "flags first", args: []string{"-n", "jobs", "--timeout", "10s", "backup", "--", "./backup.sh", "-v"},
			lease: "backup", ns: "jobs", command: []string{"./backup.sh", "-v"}},
		{name: "flags after the name", args: []string{"backup", "-n", "jobs", "--", "sh", "-c", "exit 3"},
			lease: "backup", ns: "jobs", command: []string{"sh", "-c", "exit 3"}},
		{name: "no dashes", args: []string{"--namespace=jobs", "backup", "--timeout", "1s", "./backup.sh", "-n", "x"},
			lease: "backup", ns: "jobs", command: []string{"./backup.sh", "-n", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("lock", flag.ContinueOnError)
			var f electionFlags
			f.register(fs)
			fs.Duration("timeout", 0, "")
			name, command, err := parseLockArgs(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if name != tc.lease {
				t.Errorf("name %q, want %q", name, tc.lease)
			}
			if diff := cmp.Diff(tc.command, command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if f.namespace != tc.ns {
				t.Errorf("namespace %q, want %q", f.namespace, tc.ns)
			}
		})
	}
}

func TestLockUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"lock"},
		{"lock", "name"},
		{"lock", "name", "--"},
		{"lock", "a", "b", "--", "true"},
		{"lock", "--no-such-flag", "name", "--", "true"},
	} {
		err := Run(context.Background(), args, io.Discard, io.Discard)
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != 125 {
			t.Errorf("%q: %v, want exit code 125", args, err)
		}
	}
	for _, args := range [][]string{{"lock", "-h"}, {"elect", "-h"}, {"lock", "name", "-h", "--", "true"}} {
		if err := Run(context.Background(), args, io.Discard, io.Discard); err != nil {
			t.Errorf("%q: %v, want nil (exit 0)", args, err)
		}
	}
}

func TestScaleDurations(t *testing.T) {
	for _, tc := range []struct {
		set                  []string
		lease, renew, retry  time.Duration
		wantRenew, wantRetry time.Duration
	}{
		{nil, 15 * time.Second, 10 * time.Second, 2 * time.Second, 10 * time.Second, 2 * time.Second},
		{[]string{"lease-duration"}, 3 * time.Second, 10 * time.Second, 2 * time.Second, 2 * time.Second, 400 * time.Millisecond},
		{[]string{"lease-duration"}, 60 * time.Second, 10 * time.Second, 2 * time.Second, 40 * time.Second, 8 * time.Second},
		{[]string{"lease-duration", "renew-deadline"}, 3 * time.Second, 5 * time.Second, 2 * time.Second, 5 * time.Second, 400 * time.Millisecond},
		{[]string{"lease-duration", "retry-period"}, 3 * time.Second, 10 * time.Second, time.Second, 2 * time.Second, time.Second},
	} {
		set := map[string]bool{}
		for _, s := range tc.set {
			set[s] = true
		}
		e := lock.Election{LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
		scaleDurations(&e, set)
		if e.RenewDeadline != tc.wantRenew || e.RetryPeriod != tc.wantRetry {
			t.Errorf("%v %v: renew %v retry %v, want %v %v", tc.set, tc.lease, e.RenewDeadline, e.RetryPeriod, tc.wantRenew, tc.wantRetry)
		}
	}
}
