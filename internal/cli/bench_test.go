package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestHelpIsNotAnError: "-h" prints the flags and succeeds (exit status
// 0), for serve and every bench scenario.
func TestHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-h"},
		{"bench", "fill", "-h"},
		{"bench", "list", "--help"},
		{"bench", "renew", "-h"},
		{"bench", "fanout", "-h"},
		{"bench", "storm", "-h"},
		{"bench", "heartbeat", "-h"},
		{"bench", "-h"},
		{"snapshot", "-h"},
		{"snapshot", "save", "-h"},
		{"-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := Run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("error %v; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), "Usage") {
				t.Errorf("no usage printed:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "renew", "--leases", "0"},
		{"bench", "fanout", "--rate", "0"},
		{"bench", "renew", "--duration", "-1s"},
		{"bench", "fill", "extra"},
		{"bench", "storm", "--events-per-second", "-1"},
		{"bench", "renew", "--server-pid", "x"},
		{"bench", "renew", "--server-pid", "12,-3"},
	} {
		if err := Run(t.Context(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestBenchRenewNeedsFill: renew before fill says to run fill first; after
// fill it renews, with the results alone on stdout.
func TestBenchRenewNeedsFill(t *testing.T) {
	srv := testserver.Start(t)
	kc := []string{"--kubeconfig", srv.Kubeconfig(), "--namespace", "default"}
	renew := append([]string{"bench", "renew", "--leases", "20", "--clients", "2", "--duration", "500ms"}, kc...)

	var stdout, stderr bytes.Buffer
	err := Run(t.Context(), renew, &stdout, &stderr)
	if !errors.Is(err, bench.ErrNotFilled) || !strings.Contains(err.Error(), "leasehold bench fill --namespace default --leases 20") {
		t.Fatalf("renew before fill: %v, want the advice to run fill first", err)
	}

	if err := Run(t.Context(), append([]string{"bench", "fill", "--leases", "10", "--clients", "2"}, kc...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	// Half filled is not filled: lease-000019 is missing.
	if err := Run(t.Context(), renew, io.Discard, io.Discard); !errors.Is(err, bench.ErrNotFilled) || !strings.Contains(err.Error(), "lease-000019") {
		t.Fatalf("renew after a smaller fill: %v", err)
	}

	if err := Run(t.Context(), append([]string{"bench", "fill", "--leases", "20", "--clients", "2"}, kc...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := Run(t.Context(), renew, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "renew: 2 clients over 20 leases: ") || strings.Count(out, "\n") != 1 {
		t.Errorf("renew output:\n%s", out)
	}

	// With the server's pids (the test's own process, twice: the sums of
	// several processes), its CPU per renewal and memory.
	stdout.Reset()
	pid := strconv.Itoa(os.Getpid())
	if err := Run(t.Context(), append(renew, "--server-pid", pid+","+pid), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !regexp.MustCompile(`\nserver: [0-9.]+ cores \([0-9.]+s CPU in [0-9.]+s; [0-9.]+ (µs|ms) per renewal\), peak RSS [0-9.]+ MiB\n$`).MatchString(out) {
		t.Errorf("renew output with --server-pid:\n%s", out)
	}
}

// TestBenchStorm: a short storm, and its baseline, against a server that
// expires events after a second: the renewals, the events, and the
// store's sizes before, after, and once the events have expired.
func TestBenchStorm(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.EventTTL = time.Second })
	kc := []string{"--kubeconfig", srv.Kubeconfig(), "--namespace", "default", "--server-pid", fmt.Sprint(os.Getpid())}
	if err := Run(t.Context(), append([]string{"bench", "fill", "--leases", "10", "--clients", "2"}, kc...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	storm := append([]string{"bench", "storm", "--leases", "10", "--clients", "2", "--renew-interval", "100ms", "--duration", "1s",
		"--data-dir", srv.DataDir, "--event-clients", "2", "--events-per-second", "50", "--wait-expiry", "30s", "--settle", "1ms"}, kc...)
	var stdout bytes.Buffer
	if err := Run(t.Context(), storm, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"store before: 0 events", "storm: renew: 10 holders every 100ms", "storm: events: ", "server: ", "store after the storm: ", "store after the expiry: 0 events, server RSS", "data on disk"} {
		if !strings.Contains(out, want) {
			t.Errorf("storm output lacks %q:\n%s", want, out)
		}
	}
	stdout.Reset()
	baseline := append([]string{"bench", "storm", "--leases", "10", "--clients", "2", "--renew-interval", "100ms", "--duration", "500ms", "--events-per-second", "0"}, kc...)
	if err := Run(t.Context(), baseline, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.Contains(out, "storm: no events (the baseline)") {
		t.Errorf("baseline output:\n%s", out)
	}
}

// TestBenchHeartbeat: node leases created where kubelets keep them, each
// renewed every 200 ms with the bytes the server last returned, while
// another writer keeps changing one of them: its heartbeats conflict, get
// it again and succeed, as the kubelet's do; none fails.
func TestBenchHeartbeat(t *testing.T) {
	srv := testserver.Start(t)
	c := srv.Client(t)
	kc := []string{"--kubeconfig", srv.Kubeconfig(), "--server-pid", fmt.Sprint(os.Getpid())}
	hb := append([]string{"bench", "heartbeat", "--nodes", "20", "--period", "200ms", "--duration", "2s", "--warmup", "300ms", "--connections", "2", "--in-flight", "4"}, kc...)

	// The other writer, from the moment node-000003 exists.
	done := make(chan struct{})
	defer close(done)
	var changes atomic.Int64
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l, err := c.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "node-000003", metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Labels = map[string]string{"changed": strconv.FormatInt(changes.Load(), 10)}
			if _, err := c.CoordinationV1().Leases("kube-node-lease").Update(t.Context(), l, metav1.UpdateOptions{}); err == nil {
				changes.Add(1)
			}
		}
	}()

	var stdout bytes.Buffer
	before := time.Now()
	if err := Run(t.Context(), hb, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	t.Log(out)
	m := regexp.MustCompile(`heartbeat: 20 nodes every 200ms over 2 connections: (\d+) of (\d+) due renewals made \(.*\), (\d+) failed, (\d+) conflicts; latency from when due n=\d+`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("heartbeat output:\n%s", out)
	}
	made, _ := strconv.Atoi(m[1])
	if m[1] != m[2] || m[3] != "0" || made < 150 {
		t.Errorf("%s of %s due renewals made (want 200 over 2 s), %s failed", m[1], m[2], m[3])
	}
	if m[4] == "0" || changes.Load() == 0 {
		t.Errorf("%s conflicts with %d changes by the other writer: want some", m[4], changes.Load())
	}
	for _, want := range []string{"heartbeat: 20 node leases ready in ", "generator: ", "server: ", "sustained: "} {
		if !strings.Contains(out, want) {
			t.Errorf("heartbeat output lacks %q", want)
		}
	}

	leases, err := c.CoordinationV1().Leases("kube-node-lease").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 20 {
		t.Fatalf("%d leases in kube-node-lease, want 20", len(leases.Items))
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != l.Name || l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(before.Add(time.Second)) {
			t.Errorf("lease %s: holder %v, renewed %v; want held by itself and renewed in the run's last second", l.Name, l.Spec.HolderIdentity, l.Spec.RenewTime)
		}
	}
	if got := leases.Items[3].Labels["changed"]; got == "" {
		t.Errorf("node-000003 lost the other writer's label: the heartbeat overwrote it")
	}

	// In JSON, on the leases the run left.
	stdout.Reset()
	if err := Run(t.Context(), append(hb, "--json", "--duration", "500ms"), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !regexp.MustCompile(`: (\d+) of (\d+) due renewals made \(.*\), 0 failed`).MatchString(out) || strings.Contains(out, ": 0 of") {
		t.Errorf("heartbeat --json output:\n%s", out)
	}
}
