package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// compactions records the "compacted etcd history" messages of the
// engines that log to it.
type compactions struct {
	mu     sync.Mutex // guards rounds
	rounds []compaction
}

type compaction struct {
	replica string
	rev     int64
	round   int64
	at      time.Time
}

func (c *compactions) logger(replica string) *slog.Logger {
	return slog.New(&compactionHandler{c: c, replica: replica})
}

func (c *compactions) all() []compaction {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]compaction(nil), c.rounds...)
}

// compactionHandler is a slog.Handler that keeps only compaction records.
type compactionHandler struct {
	c       *compactions
	replica string
}

func (h *compactionHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *compactionHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *compactionHandler) WithGroup(string) slog.Handler            { return h }
func (h *compactionHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "compacted etcd history" {
		return nil
	}
	cp := compaction{replica: h.replica, at: r.Time}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "rev":
			cp.rev = a.Value.Int64()
		case "round":
			cp.round = a.Value.Int64()
		}
		return true
	})
	h.c.mu.Lock()
	h.c.rounds = append(h.c.rounds, cp)
	h.c.mu.Unlock()
	return nil
}

// TestCompactionCoordinated runs two replicas' compaction loops on one
// cluster: together they compact once per interval (not once each), each
// round to a revision older than the last, and when the replica that
// compacts goes away the other takes over.
func TestCompactionCoordinated(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	c := etcdtest.Start(t, etcdtest.Config{})
	raw := c.Client(t)
	ctx := t.Context()
	var log compactions
	a := open(t, c, etcd.Options{CompactInterval: interval, Logger: log.logger("a")}, false)
	b := open(t, c, etcd.Options{CompactInterval: interval, Logger: log.logger("b")}, false)

	// A write load, so that every round has a new revision to compact to.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	defer func() { stopLoad(); load.Wait() }()
	first, err := a.Put(ctx, "/registry/leases/ns/load", []byte("0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	load.Go(func() {
		kv := first
		for loadCtx.Err() == nil {
			next, err := b.Put(loadCtx, kv.Key, []byte("x"), kv.ModRevision)
			if err != nil {
				if loadCtx.Err() == nil {
					t.Errorf("load: %v", err)
				}
				return
			}
			kv = next
			select {
			case <-loadCtx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})

	// Compaction starts: watching from before it fails.
	start := time.Now()
	waitUntil(t, 10*time.Second, "a compaction past the first write", func() bool {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, err := a.Watch(wctx, "/registry/", first.ModRevision-1)
		return errors.Is(err, storage.ErrCompacted)
	})
	waitUntil(t, 10*time.Second, "five compaction rounds", func() bool { return len(log.all()) >= 5 })
	elapsed := time.Since(start)

	rounds := log.all()
	checkRounds(t, rounds)
	resp, err := raw.Get(ctx, "compact_rev_key")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get compact_rev_key: %v, %v", resp, err)
	}
	// Every round bumps the key's version once; two uncoordinated loops
	// would bump it twice per interval.
	version := resp.Kvs[0].Version
	if limit := int64(elapsed/interval) + 3; version > limit {
		t.Errorf("compact_rev_key version %d after %v: more than one round per interval of %v (limit %d)", version, elapsed, interval, limit)
	}
	if int64(len(rounds)) > version {
		t.Errorf("%d compactions logged, but only %d rounds ran", len(rounds), version)
	}

	// The replica that compacted last goes away; the other takes over
	// within two intervals.
	last := rounds[len(rounds)-1]
	leaver, stayer := a, "b"
	if last.replica == "b" {
		leaver, stayer = b, "a"
	}
	if leaver == b {
		// The load writes through b; move it to a first.
		stopLoad()
		load.Wait()
	}
	if err := leaver.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	waitUntil(t, 10*time.Second, "replica "+stayer+" to take over", func() bool {
		for _, r := range log.all() {
			if r.replica == stayer && r.at.After(closed) {
				return true
			}
		}
		return false
	})
	t.Logf("%s took over after %v", stayer, time.Since(closed))
	checkRounds(t, log.all())
}

// checkRounds checks that each round compacted once, to a higher revision
// than the round before.
func checkRounds(t *testing.T, rounds []compaction) {
	t.Helper()
	for i := 1; i < len(rounds); i++ {
		prev, cur := rounds[i-1], rounds[i]
		if cur.round <= prev.round || cur.rev <= prev.rev {
			t.Errorf("compaction %d (replica %s, round %d, rev %d) does not follow compaction %d (replica %s, round %d, rev %d)",
				i, cur.replica, cur.round, cur.rev, i-1, prev.replica, prev.round, prev.rev)
		}
	}
}

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
