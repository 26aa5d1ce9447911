package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
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
