// Command etcdfloor asks of etcd what a lease renewal must ask of it, and
// nothing else: one compare-and-swap transaction (If the key's
// ModRevision is the one last read, Then Put the value, Else Get it), of a
// value the size of a stored Lease, from a bare etcd client, --clients at
// once over --keys keys (each client its own keys: no conflicts), for
// --duration. With --probe each renewal first reads the store's revision
// (a count-only Range, as a consistent GET must); with --watchers N, N
// watches of the prefix get every write back, as the watch caches of N API
// server replicas do. etcd's CPU around the run, divided by the
// transactions, is the least an API server on etcd can cost etcd a
// renewal: test/perf/etcd.sh reads it from /proc.
//
//	go run ./test/perf/etcdfloor --endpoints http://127.0.0.1:23790 --duration 20s
//
// It prints "etcdfloor: N transactions in D: R/s; client CPU C µs a
// transaction", C being its own CPU (its watches' included): what the
// etcd client library alone costs a caller for that work. Its keys are
// under --prefix, deleted at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// config is what a run does; see the flags.
type config struct {
	endpoints, prefix         string
	clients, keys, valueBytes int
	duration                  time.Duration
	probe                     bool
	watchers                  int
	rate                      float64
}

func main() {
	var c config
	flag.StringVar(&c.endpoints, "endpoints", "http://127.0.0.1:23790", "etcd client URLs, comma-separated")
	flag.StringVar(&c.prefix, "prefix", "/etcdfloor/", "prefix of the keys written")
	flag.IntVar(&c.clients, "clients", 32, "transactions at once")
	flag.IntVar(&c.keys, "keys", 1000, "keys renewed")
	flag.IntVar(&c.valueBytes, "value-bytes", 350, "size of each value (a stored Lease's, protobuf)")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "how long to renew")
	flag.BoolVar(&c.probe, "probe", false, "read the store's revision before each transaction, as a consistent GET does")
	flag.IntVar(&c.watchers, "watchers", 0, "watches of the prefix throughout, as each API server replica's watch cache keeps one")
	flag.Float64Var(&c.rate, "rate", 0, "transactions a second, paced (0: as fast as the clients go); etcd's cost a transaction falls as its rate rises (larger batches), so compare at the rate an API server reached")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "etcdfloor:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	endpoints, prefix, clients, keys, valueBytes := cfg.endpoints, cfg.prefix, cfg.clients, cfg.keys, cfg.valueBytes
	duration, probe, watchers := cfg.duration, cfg.probe, cfg.watchers
	if keys < 1 || clients < 1 {
		return fmt.Errorf("--keys and --clients must be at least 1")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	value := strings.Repeat("x", valueBytes)
	revs := make([]int64, keys)
	for i := range keys {
		resp, err := cli.Put(ctx, key(prefix, i), value)
		if err != nil {
			return err
		}
		revs[i] = resp.Header.Revision
	}
	defer func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) }()

	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	for range watchers {
		// Every write comes back as an event, values included: what etcd
		// sends each replica's watch cache. A client of its own each, as
		// each replica has.
		wc, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer wc.Close()
		events := wc.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(revs[keys-1]+1))
		go func() {
			for range events {
			}
		}()
	}

	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	end := time.Now().Add(duration)
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var mine []int // this client's keys: no other writes them
			for i := c; i < keys; i += clients {
				mine = append(mine, i)
			}
			var interval time.Duration // between this client's transactions, when paced
			if cfg.rate > 0 {
				interval = time.Duration(float64(clients) / cfg.rate * float64(time.Second))
			}
			next := start
			for n := 0; len(mine) > 0 && time.Now().Before(end); n++ {
				if interval > 0 {
					next = next.Add(interval)
					time.Sleep(time.Until(next))
				}
				i := mine[n%len(mine)]
				k := key(prefix, i)
				if probe {
					if _, err := cli.Get(ctx, "/etcdfloor-probe", clientv3.WithCountOnly()); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
				}
				resp, err := cli.Txn(ctx).
					If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[i])).
					Then(clientv3.OpPut(k, value)).
					Else(clientv3.OpGet(k)).Commit()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if !resp.Succeeded {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: conflict: another writer", k) })
					return
				}
				revs[i] = resp.Header.Revision
				done.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	n := done.Load()
	fmt.Printf("etcdfloor: %d transactions in %v: %.0f/s; client CPU %d µs a transaction\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), (cpuTime()-cpu0).Microseconds()/max(n, 1))
	return nil
}

// cpuTime is the CPU this process has used: what a bare etcd client
// costs its caller, the part of an API server on etcd no server code adds.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func key(prefix string, i int) string { return fmt.Sprintf("%skey-%06d", prefix, i) }
