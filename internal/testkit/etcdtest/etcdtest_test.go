package etcdtest_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// TestClusterFaults starts three members, kills the leader, checks that the
// others elect a new one and serve writes, and restarts the old leader.
func TestClusterFaults(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Config{Size: 3})
	cl := c.Client(t)
	ctx := t.Context()
	if _, err := cl.Put(ctx, "k", "1"); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	if leader.Running() {
		t.Fatal("killed member still running")
	}
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("leader %s still leads after it was killed", leader.Name)
	}
	if _, err := cl.Put(ctx, "k", "2"); err != nil {
		t.Fatalf("write after the leader was killed: %v", err)
	}
	start := time.Now()
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted %s in %v", leader.Name, time.Since(start))
	resp, err := cl.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("Get after restart: %v, %v", resp, err)
	}
}

func TestSingle(t *testing.T) {
	start := time.Now()
	c := etcdtest.Start(t, etcdtest.Config{})
	t.Logf("single member ready in %v", time.Since(start))
	if _, err := c.Client(t).Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	c.Members[0].Stop()
	if c.Members[0].Running() {
		t.Fatal("stopped member still running")
	}
}
