// Command kvchoice measures durable write throughput of bbolt and pebble
// under the write shape of leasehold's embedded storage engine, to choose
// between them: writers enqueue puts, ONE committer goroutine drains
// everything queued (up to 1000 puts) into one batch, commits it with one
// fsync, and only then answers each writer of the batch (group commit).
//
// Usage, from this directory (a module of its own, so that the engines
// compared stay out of leasehold's go.mod):
//
//	go run . -dir /path/on/the/disk/to/test [-engines bbolt,pebble] [-writers 1,16,128] [-d 10s] [-keys 50000] [-value 500]
//
// For every engine and writer count, kvchoice runs a child process that
// loads -keys keys into a fresh database under -dir, then lets the writers
// overwrite random keys with -value-byte values for -d. It prints writes
// per second, p50 and p99 latency, and the child's peak RSS (so every run's
// memory is measured alone). -dir must be on the disk being judged: on a
// tmpfs an fsync costs nothing and every number is meaningless.
//
// bbolt runs with etcd's options (no freelist sync, hashmap freelist) and
// pebble with its defaults. Peak RSS includes loading the keys.
//
// A run on the 2-vCPU VM where the choice was made (virtio disk, fsync
// about 0.2 ms, 10 s per measurement; an earlier run of the prototype gave
// 2.4k/8.6k/22k and 4.1k/26k/75k writes/s):
//
//	engine  writers   writes/s        p50        p99  peak RSS
//	bbolt         1       2080      458µs      925µs      111MiB
//	bbolt        16       7573    1.903ms     7.09ms      114MiB
//	bbolt       128      18439    6.023ms   18.178ms      118MiB
//	pebble        1       4848      178µs      509µs       78MiB
//	pebble       16      29127      450µs    3.236ms       75MiB
//	pebble      128      84205      891µs   15.317ms       83MiB
//
// pebble appends each batch to its write-ahead log: one sequential write
// and one fsync. bbolt writes every page the batch dirtied (copy-on-write,
// scattered), fsyncs, then writes its meta page and fsyncs again.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
)

// Group commit limits, as in the engine: the queue holds this many puts
// (writers block when it is full) and one batch takes at most maxBatch.
const (
	queueSize = 4096
	maxBatch  = 1000
)

type config struct {
	engines  []string
	writers  []int
	duration time.Duration
	keys     int
	valueLen int
	dir      string
}

func main() {
	var (
		cfg     config
		engines = flag.String("engines", "bbolt,pebble", "comma-separated engines to measure: bbolt, pebble")
		writers = flag.String("writers", "1,16,128", "comma-separated numbers of concurrent writers")
		child   = flag.String("child", "", "internal: run one measurement, ENGINE:WRITERS, and print it")
	)
	flag.DurationVar(&cfg.duration, "d", 10*time.Second, "duration of each measurement")
	flag.IntVar(&cfg.keys, "keys", 50000, "keys loaded before measuring; writers overwrite random ones")
	flag.IntVar(&cfg.valueLen, "value", 500, "value size in bytes (a Lease is about 500)")
	flag.StringVar(&cfg.dir, "dir", ".", "directory for the databases: on the disk to judge, never a tmpfs")
	flag.Parse()

	var err error
	if cfg.valueLen < 8 || cfg.keys < 1 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "kvchoice: -value must be at least 8, -keys and -d positive")
		os.Exit(2)
	}
	if *child != "" {
		err = runChild(cfg, *child)
	} else {
		cfg.engines = strings.Split(*engines, ",")
		if cfg.writers, err = parseInts(*writers); err == nil {
			err = runAll(cfg)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvchoice:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad writer count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runAll runs each measurement in a child process, so that each peak RSS
// belongs to one engine and one writer count.
func runAll(cfg config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("%-7s %7s %10s %10s %10s %9s\n", "engine", "writers", "writes/s", "p50", "p99", "peak RSS")
	for _, engine := range cfg.engines {
		for _, w := range cfg.writers {
			cmd := exec.Command(self,
				"-child", fmt.Sprintf("%s:%d", engine, w),
				"-d", cfg.duration.String(), "-keys", strconv.Itoa(cfg.keys),
				"-value", strconv.Itoa(cfg.valueLen), "-dir", cfg.dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%s with %d writers: %w", engine, w, err)
			}
			// Maxrss is in KiB on Linux.
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
			fmt.Printf("%s %8.0fMiB\n", strings.TrimSpace(string(out)), float64(rss)/1024)
		}
	}
	return nil
}

// runChild performs one measurement and prints its line, without the RSS,
// which the parent adds.
func runChild(cfg config, spec string) error {
	engine, ws, ok := strings.Cut(spec, ":")
	writers, err := strconv.Atoi(ws)
	if !ok || err != nil || writers < 1 {
		return fmt.Errorf("bad -child %q", spec)
	}
	dir, err := os.MkdirTemp(cfg.dir, "kvchoice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	var kv store
	switch engine {
	case "bbolt":
		kv, err = openBolt(filepath.Join(dir, "bolt.db"))
	case "pebble":
		kv, err = openPebble(dir)
	default:
		err = fmt.Errorf("unknown engine %q", engine)
	}
	if err != nil {
		return err
	}
	if err := load(kv, cfg.keys, cfg.valueLen); err != nil {
		return errors.Join(err, kv.close())
	}

	g := startGroupCommit(kv)
	lat := runWriters(g, writers, cfg)
	if err := errors.Join(g.stop(), kv.close()); err != nil {
		return err
	}
	slices.Sort(lat)
	fmt.Printf("%-7s %7d %10.0f %10v %10v\n", engine, writers,
		float64(len(lat))/cfg.duration.Seconds(),
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	return nil
}

func key(i int) []byte {
	return fmt.Appendf(nil, "/registry/leases/ns%03d/lease-%06d", i%100, i)
}

// store is one engine: it commits a batch of puts durably.
type store interface {
	commit(batch []*put) error
	close() error
}

type put struct {
	key, value []byte
	done       chan error
}

// load writes keys in batches of 10000, durably.
func load(kv store, keys, valueLen int) error {
	value := make([]byte, valueLen)
	batch := make([]*put, 0, 10000)
	for i := range keys {
		batch = append(batch, &put{key: key(i), value: value})
		if len(batch) == cap(batch) || i == keys-1 {
			if err := kv.commit(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

type boltStore struct{ db *bolt.DB }

var bucket = []byte("kv")

func openBolt(path string) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &boltStore{db}, nil
}

// commit writes the batch in one read-write transaction; bbolt fsyncs on
// commit.
func (b *boltStore) commit(batch []*put) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucket)
		for _, p := range batch {
			if err := bk.Put(p.key, p.value); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *boltStore) close() error { return b.db.Close() }

type pebbleStore struct{ db *pebble.DB }

func openPebble(dir string) (*pebbleStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	return &pebbleStore{db}, nil
}

// commit writes the batch as one pebble batch, synced.
func (p *pebbleStore) commit(batch []*put) error {
	b := p.db.NewBatch()
	defer b.Close()
	for _, r := range batch {
		if err := b.Set(r.key, r.value, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (p *pebbleStore) close() error { return p.db.Close() }

// quietLogger drops pebble's informational messages, which would interleave
// with the results.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: fatal: "+format+"\n", args...)
	os.Exit(1)
}

// groupCommit is the committer: one goroutine, one batch per drain.
type groupCommit struct {
	queue chan *put // capacity queueSize; writers block when it is full
	wg    sync.WaitGroup
	err   error // first commit error; read after stop
}

func startGroupCommit(kv store) *groupCommit {
	g := &groupCommit{queue: make(chan *put, queueSize)}
	g.wg.Go(func() {
		batch := make([]*put, 0, maxBatch)
		for first := range g.queue {
			batch = append(batch[:0], first)
		drain:
			for len(batch) < maxBatch {
				select {
				case p, ok := <-g.queue:
					if !ok {
						break drain
					}
					batch = append(batch, p)
				default:
					break drain
				}
			}
			err := kv.commit(batch)
			if err != nil && g.err == nil {
				g.err = err
			}
			for _, p := range batch {
				p.done <- err
			}
		}
	})
	return g
}

// put enqueues one write and waits until it is durable.
func (g *groupCommit) put(p *put) error {
	g.queue <- p
	return <-p.done
}

// stop ends the committer once every writer has returned.
func (g *groupCommit) stop() error {
	close(g.queue)
	g.wg.Wait()
	return g.err
}

// runWriters runs writers goroutines that overwrite random keys until the
// duration has passed, and returns every write's latency.
func runWriters(g *groupCommit, writers int, cfg config) []time.Duration {
	deadline := time.Now().Add(cfg.duration)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all []time.Duration
	)
	for range writers {
		wg.Go(func() {
			var lat []time.Duration
			p := &put{done: make(chan error, 1)}
			for time.Now().Before(deadline) {
				// A fresh value each time: the engine owns it until done.
				p.value = make([]byte, cfg.valueLen)
				binary.BigEndian.PutUint64(p.value, rand.Uint64())
				p.key = key(rand.IntN(cfg.keys))
				start := time.Now()
				if err := g.put(p); err != nil {
					fmt.Fprintln(os.Stderr, "kvchoice: put:", err)
					os.Exit(1)
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}
