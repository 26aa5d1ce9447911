package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
	"github.com/leasehold/leasehold/internal/storage/etcd"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/storagetest"
)

// maxRequestBytes lets etcd accept a value of exactly
// etcd.DefaultMaxValueSize with its key and transaction around it (etcd's
// default limit, 1.5 MiB, is on the whole request), so that the suite sees
// the engine's own limit.
var maxRequestBytes = fmt.Sprintf("--max-request-bytes=%d", etcd.DefaultMaxValueSize+64<<10)

// TestConformance runs the storage suite against a single member. It is
// not parallel, so that it can check for leaked goroutines.
func TestConformance(t *testing.T) {
	runConformance(t, etcdtest.Start(t, etcdtest.Config{Args: []string{maxRequestBytes}}), true)
}

// TestConformanceThreeMembers runs the suite against a three-member
// cluster: requests are spread over the members, and a watch's member may
// lag the one that answered Revision.
func TestConformanceThreeMembers(t *testing.T) {
	t.Parallel()
	runConformance(t, etcdtest.Start(t, etcdtest.Config{Size: 3, Args: []string{maxRequestBytes}}), false)
}

func runConformance(t *testing.T, c *etcdtest.Cluster, checkLeaks bool) {
	raw := c.Client(t)
	storagetest.RunTests(t, func(t *testing.T) storage.Interface {
		// Every subtest gets an empty key space. The suite counts
		// revisions, so no compaction loop may write meanwhile.
		if _, err := raw.Delete(t.Context(), "\x00", clientv3.WithFromKey()); err != nil {
			t.Fatalf("emptying etcd: %v", err)
		}
		return open(t, c, etcd.Options{CompactInterval: -1}, checkLeaks)
	}, storagetest.Options{
		MaxValueSize: etcd.DefaultMaxValueSize,
		Compact: func(t *testing.T, s storage.Interface, rev int64) {
			if err := s.(*etcd.Store).Compact(t.Context(), rev); err != nil {
				t.Fatalf("Compact(%d): %v", rev, err)
			}
		},
	})
}

// open opens a store on c's members and closes it when the test ends; with
// checkLeaks, it then checks that the store's goroutines (and the etcd
// client's) are gone.
func open(t testing.TB, c *etcdtest.Cluster, opts etcd.Options, checkLeaks bool) *etcd.Store {
	t.Helper()
	before := runtime.NumGoroutine()
	if opts.Endpoints == nil {
		opts.Endpoints = c.Endpoints()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	s, err := etcd.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if checkLeaks {
			checkGoroutines(t, before)
		}
	})
	return s
}

// checkGoroutines waits, up to a deadline, for the goroutine count to drop
// back to what it was before the store opened.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines leaked: %d before Open, %d after Close\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// testLogger discards unless LEASEHOLD_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("LEASEHOLD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// nextProgress waits up to timeout for a progress note at or above rev on
// w, skipping other events, and returns how long it took.
func nextProgress(t *testing.T, w storage.Watch, rev int64, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended while waiting for progress at %d: %v", rev, w.Err())
			}
			if ev.Type == storage.EventProgress && ev.Revision >= rev {
				return time.Since(start)
			}
		case <-timer.C:
			t.Fatalf("no progress note at or above %d within %v", rev, timeout)
		}
	}
}

// TestRevisionMakesWatchesProgress checks the promise the watch cache's
// consistent reads rely on: once Revision has returned R, every watch of
// the engine reports R promptly, even when the writes up to R were made
// behind the engine's back, to keys outside the watch's prefix, and etcd
// itself would send a progress notification only after 10 minutes.
func TestRevisionMakesWatchesProgress(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("members=%d", size), func(t *testing.T) {
			t.Parallel()
			c := etcdtest.Start(t, etcdtest.Config{Size: size})
			raw := c.Client(t)
			s := open(t, c, etcd.Options{CompactInterval: -1}, false)
			other := open(t, c, etcd.Options{CompactInterval: -1}, false) // another replica
			ctx := t.Context()

			from, err := s.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Watch(ctx, "/registry/", from)
			if err != nil {
				t.Fatal(err)
			}
			writes := []struct {
				name  string
				write func() error
			}{
				{"raw client, outside the prefix", func() error {
					_, err := raw.Put(ctx, "/elsewhere/k", "v")
					return err
				}},
				{"another replica, another prefix", func() error {
					_, err := other.Put(ctx, fmt.Sprintf("/tenant-b/leases/ns/%d", time.Now().UnixNano()), []byte("v"), 0)
					return err
				}},
				{"compaction coordination key", func() error {
					_, err := raw.Put(ctx, "compact_rev_key", "1")
					return err
				}},
			}
			for range 3 {
				for _, wr := range writes {
					if err := wr.write(); err != nil {
						t.Fatalf("%s: %v", wr.name, err)
					}
					rev, err := s.Revision(ctx)
					if err != nil {
						t.Fatal(err)
					}
					took := nextProgress(t, w, rev, time.Second)
					t.Logf("%s: progress at %d after %v", wr.name, rev, took)
				}
			}
		})
	}
}

// TestTooLargeFromEtcd checks that etcd's own size limits map to
// ErrTooLarge when the engine's limit lets a value through.
func TestTooLargeFromEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{Args: []string{maxRequestBytes}})
	s := open(t, c, etcd.Options{CompactInterval: -1, MaxValueSize: 8 << 20}, false)
	ctx := t.Context()
	r0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size int
	}{
		{"above etcd's --max-request-bytes", etcd.DefaultMaxValueSize + 128<<10},
		{"above the client's gRPC send limit", 3 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(ctx, "/registry/leases/ns/big", bytes.Repeat([]byte{'x'}, tc.size), 0)
			if !errors.Is(err, storage.ErrTooLarge) {
				t.Fatalf("Put of %d bytes: got %v, want ErrTooLarge", tc.size, err)
			}
		})
	}
	if rev, err := s.Revision(ctx); err != nil || rev != r0 {
		t.Errorf("Revision after rejected writes = %d, %v; want %d", rev, err, r0)
	}
}

// TestUnreachable checks that requests to a cluster out of reach fail with
// ErrUnavailable by their deadline (the caller's, or RequestTimeout), that
// Open fails the same way, and that the store and an open watch recover
// when the cluster is back.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("Open", func(t *testing.T) {
		start := time.Now()
		_, err := etcd.Open(ctx, etcd.Options{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 500 * time.Millisecond, Logger: testLogger()})
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Open of an unreachable cluster: got %v, want ErrUnavailable", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Open took %v with a 500ms dial timeout", took)
		}
	})

	c := etcdtest.Start(t, etcdtest.Config{})
	const requestTimeout = time.Second
	s := open(t, c, etcd.Options{CompactInterval: -1, RequestTimeout: requestTimeout}, false)
	kv, err := s.Put(ctx, "/registry/leases/ns/a", []byte("1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/registry/", kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	c.Members[0].Kill()

	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, kv.Key); return err }},
		{"List", func(ctx context.Context) error { _, err := s.List(ctx, "/registry/"); return err }},
		{"Put", func(ctx context.Context) error { _, err := s.Put(ctx, kv.Key, []byte("2"), kv.ModRevision); return err }},
		{"Delete", func(ctx context.Context) error { _, err := s.Delete(ctx, kv.Key, kv.ModRevision); return err }},
		{"Revision", func(ctx context.Context) error { _, err := s.Revision(ctx); return err }},
		{"Watch", func(ctx context.Context) error { _, err := s.Watch(ctx, "/registry/", kv.ModRevision); return err }},
	}
	for _, tc := range calls {
		t.Run(tc.name+"/caller deadline", func(t *testing.T) {
			const deadline = 300 * time.Millisecond
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			err := tc.call(cctx)
			took := time.Since(start)
			if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want ErrUnavailable and DeadlineExceeded", err)
			}
			// gRPC may give up a little before the deadline (it was seen
			// 1 ms early): the point is that it neither fails at once
			// nor waits past it.
			if took < deadline-50*time.Millisecond || took > deadline+time.Second {
				t.Errorf("returned after %v, want about %v", took, deadline)
			}
		})
		t.Run(tc.name+"/request timeout", func(t *testing.T) {
			start := time.Now()
			err := tc.call(ctx)
			took := time.Since(start)
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("got %v, want ErrUnavailable", err)
			}
			if took < requestTimeout-50*time.Millisecond || took > requestTimeout+time.Second {
				t.Errorf("returned after %v, want about the request timeout %v", took, requestTimeout)
			}
		})
	}

	// The cluster comes back: the store and the watch carry on, once the
	// client has reconnected (within its reconnection backoff).
	if err := c.Members[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var next storage.KeyValue
	waitUntil(t, 10*time.Second, "a write after the member restarted", func() bool {
		var ce *storage.ConflictError
		switch next, err = s.Put(ctx, kv.Key, []byte("2"), kv.ModRevision); {
		case err == nil:
			return true
		case errors.As(err, &ce) && ce.Current != nil && string(ce.Current.Value) == "2":
			next = *ce.Current // an attempt that timed out was applied
			return true
		case !errors.Is(err, storage.ErrUnavailable):
			t.Fatalf("Put after the member restarted: %v", err)
		}
		return false
	})
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			if ev.Type == storage.EventProgress {
				continue
			}
			if ev.KV.Key != kv.Key || ev.Revision != next.ModRevision || string(ev.KV.Value) != string(next.Value) {
				t.Fatalf("watch after the restart: got %v %q at %d, want the update at %d", ev.Type, ev.KV.Key, ev.Revision, next.ModRevision)
			}
			return
		case <-timer.C:
			t.Fatal("the watch open across the outage saw no event after it")
		}
	}
}

// TestCloseEndsRequestsInFlight checks that Close ends a request waiting
// for an unreachable cluster with ErrUnavailable, without waiting for its
// timeout.
func TestCloseEndsRequestsInFlight(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{})
	s, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), CompactInterval: -1, RequestTimeout: time.Minute, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c.Members[0].Kill()
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(context.Background(), "/registry/leases/ns/a")
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the Get start waiting; either way it must fail
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Get in flight at Close: got %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v", took)
	}
	if !strings.Contains(fmt.Sprint(s.Compact(t.Context(), 1)), "closed") {
		t.Errorf("Compact after Close did not report the store closed")
	}
}

// TestTLS connects over TLS with a client certificate, and checks that a
// client without one is refused at Open.
func TestTLS(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{TLS: true})
	ctx := t.Context()
	s := open(t, c, etcd.Options{CompactInterval: -1, TLS: etcd.TLS{CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile}}, false)
	kv, err := s.Put(ctx, "/registry/leases/ns/a", []byte("1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, kv.Key); err != nil || string(got.Value) != "1" {
		t.Fatalf("Get over TLS = %+v, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		tls  etcd.TLS
	}{
		{"no client certificate", etcd.TLS{CAFile: c.TLS.CAFile}},
		{"unknown CA", etcd.TLS{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := etcd.Open(ctx, etcd.Options{Endpoints: c.Endpoints(), TLS: tc.tls, DialTimeout: time.Second, Logger: testLogger()})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
	if _, err := etcd.Open(ctx, etcd.Options{Endpoints: c.Endpoints(), TLS: etcd.TLS{CertFile: c.TLS.CertFile}}); err == nil {
		t.Error("Open with a certificate but no key succeeded")
	}
}
