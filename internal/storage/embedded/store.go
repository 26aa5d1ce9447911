package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasehold/leasehold/internal/storage"
)

// Defaults for Options.
const (
	// DefaultMaxValueSize matches etcd's default request size limit
	// (--max-request-bytes, 1.5 MiB), so objects that fit one engine fit
	// the other.
	DefaultMaxValueSize = 1536 * 1024
	// DefaultHistory is how many events Watch can replay.
	DefaultHistory = 10000
	// DefaultHistoryBytes bounds the memory of those events.
	DefaultHistoryBytes = 32 << 20
	// DefaultMemTableSize and DefaultCacheSize keep pebble small: the
	// server aims at well under 250 MiB resident with 100k objects, and
	// reads are served by the watch cache, not by this engine.
	DefaultMemTableSize = 8 << 20
	DefaultCacheSize    = 8 << 20
)

// Sizes of the write path; see Store.queue and committer.
const (
	// queueSize is the capacity of the write queue. When it is full,
	// writers block (honouring their ctx) until the committer drains it.
	queueSize = 1024
	// maxBatchWrites and maxBatchBytes bound one group commit. The first
	// request is always taken, whatever its size. 2 MiB keeps batches below
	// pebble's large-batch threshold (half the memtable), above which a
	// batch forces a memtable flush.
	maxBatchWrites = 1024
	maxBatchBytes  = 2 << 20
	// busyBatch is the smallest group commit after which the next is
	// paced by Options.CommitInterval: fewer writes at once are a few
	// writers, whom waiting would only slow down.
	busyBatch = 4
)

// DefaultCommitInterval is the default Options.CommitInterval.
const DefaultCommitInterval = 2 * time.Millisecond

// Options configure a Store. The zero value is usable.
type Options struct {
	// MaxValueSize is the largest value Put accepts; larger values fail
	// with storage.ErrTooLarge. Default DefaultMaxValueSize.
	MaxValueSize int
	// History is the number of most recent events kept in memory for
	// Watch. A watch from an older revision, or a watcher that falls this
	// far behind, fails with storage.ErrCompacted. Default DefaultHistory.
	History int
	// HistoryBytes bounds the memory of those events (keys and values);
	// the oldest leave first when it is exceeded.
	// Default DefaultHistoryBytes.
	HistoryBytes int64
	// Logger receives the engine's and pebble's messages. Default: discard.
	Logger *slog.Logger
	// MemTableSize is pebble's memtable size. Default DefaultMemTableSize.
	MemTableSize uint64
	// CacheSize is pebble's block cache size. Default DefaultCacheSize.
	CacheSize int64
	// QuotaBytes bounds the live data: the keys and values of the current
	// version of every key (plus a few bytes each). A put that would grow
	// it beyond the quota fails with storage.ErrNoSpace; puts that do not
	// grow it and deletes are accepted. The files take about as much
	// again, plus up to about 4 × MemTableSize of WAL. Default
	// DefaultQuotaBytes; negative: no quota.
	QuotaBytes int64
	// ReserveBytes is the free space kept on the data directory's
	// filesystem: below it puts fail with storage.ErrNoSpace, below half
	// of it deletes too. Default DefaultReserveBytes; negative: none
	// (then a full disk stops the store; see the package documentation).
	ReserveBytes int64
	// FS replaces the operating system's file system. Tests inject disk
	// faults with it (pebble's vfs/errorfs).
	FS vfs.FS
	// Now is the clock values expire by. Default time.Now.
	Now func() time.Time
	// CommitInterval paces group commits while writes are many: after a
	// commit of n writes (at least busyBatch), the next waits until n
	// writes are queued, at most until CommitInterval after the last
	// began, and so shares its fsync with every write that arrives
	// meanwhile. Writers that each wait for their last write before the
	// next come back together, and their commits stay whole instead of
	// splitting into the few that came back first and the rest. A commit
	// costs ~100 us of CPU besides its writes' (the fsync's system call
	// and interrupts, the wake-ups). One writer, or a few, at a time are
	// not held, nor are commits on a disk slower than the interval.
	// Default DefaultCommitInterval; negative: commits never wait.
	CommitInterval time.Duration
	// OnCommit, when set, is told of every group commit that reached
	// pebble, from the committer goroutine: it must return quickly.
	OnCommit func(CommitStats)
}

// CommitStats describe one group commit, for metrics.
type CommitStats struct {
	// Writes is the number of writes the batch committed.
	Writes int
	// Sync is how long pebble took to commit the batch and fsync its WAL.
	Sync time.Duration
	// Err is the commit's failure, nil when it is durable.
	Err error
}

func (o *Options) setDefaults() error {
	if o.MaxValueSize < 0 || o.History < 0 || o.HistoryBytes < 0 || o.CacheSize < 0 {
		return errors.New("embedded: negative option")
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = DefaultMaxValueSize
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.HistoryBytes == 0 {
		o.HistoryBytes = DefaultHistoryBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.CommitInterval == 0:
		o.CommitInterval = DefaultCommitInterval
	case o.CommitInterval < 0:
		o.CommitInterval = 0
	}
	switch {
	case o.QuotaBytes == 0:
		o.QuotaBytes = DefaultQuotaBytes
	case o.QuotaBytes < 0:
		o.QuotaBytes = 0
	}
	switch {
	case o.ReserveBytes == 0:
		o.ReserveBytes = DefaultReserveBytes
	case o.ReserveBytes < 0:
		o.ReserveBytes = 0
	}
	return nil
}

// Store is the embedded storage engine. See the package documentation for
// its design; all methods are safe for concurrent use.
type Store struct {
	db   *pebble.DB
	opts Options
	log  *slog.Logger
	// fs is Options.FS with pebble's disk health checks, which
	// healthChecks stops after pebble is closed.
	fs           vfs.FS
	healthChecks io.Closer

	// mu guards closed. Every operation holds the read lock while it
	// touches pebble or enqueues a write, so that Close (write lock) knows
	// that none is in flight once it has set closed. Lock order: mu, then
	// history.mu.
	mu     sync.RWMutex
	closed bool

	// queue carries writes to the committer. Size queueSize; when full,
	// writers block until there is room or their ctx ends.
	queue chan *writeReq
	// stop tells the committer to drain the queue and exit; closed by
	// Close once no writer can enqueue any more.
	stop          chan struct{}
	committerDone chan struct{}
	// paceWant is, while the committer paces (see committer.pace), the
	// number of queued writes that ends the wait, else 0; the writer
	// that brings the queue to it sends on paceWake (capacity 1).
	paceWant atomic.Int64
	paceWake chan struct{}
	// reqs recycles write requests (see writeReq for who owns one when).
	reqs sync.Pool

	// hist is the watch history; its newest revision is the committed one.
	hist *history
	// space refuses writes before the disk or the quota is full.
	space *space
	// bgErrorLog and slowDiskLog limit the log lines of repeating
	// engine events.
	bgErrorLog, slowDiskLog logLimiter
	// committed mirrors hist.newest: the newest revision whose batch is
	// durable. Revision returns it.
	committed atomic.Int64
	// applied is the last revision of the batch being committed, stored
	// before the batch goes to pebble, which makes it visible to readers
	// before its fsync has completed. Readers that may have seen that batch
	// wait until committed reaches it, so no read returns a write that is
	// not yet durable.
	applied atomic.Int64

	// ctx is not a request context: it is the store's stop signal, ended
	// (with the reason as its cause) when the store fails or closes.
	// Watchers and readers waiting for a commit select on it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// watchers counts running watcher goroutines; Close waits for them.
	watchers sync.WaitGroup
	// background counts the reaper goroutine (store_expire.go); Close
	// waits for it.
	background sync.WaitGroup
	// snapshots counts running Snapshot calls, each holding a pebble
	// snapshot that must be released before pebble closes; Close waits
	// for them once its cancel has told them to stop.
	snapshots sync.WaitGroup
	// expiry is what the committer tells the reaper.
	expiry expiry

	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks that Store implements the contract.
var (
	_ storage.Interface     = (*Store)(nil)
	_ storage.SpaceReporter = (*Store)(nil)
)

// errClosed is the cause recorded by Close.
var errClosed = errors.New("embedded: store closed")

// Open opens, or creates, the store in dir.
//
// Recovery after a crash is pebble's: it replays its write-ahead log, which
// holds every acknowledged write (each was fsync'd before its Put or Delete
// returned). The history of events starts empty at the recovered revision,
// so a Watch from any earlier revision fails with storage.ErrCompacted.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	s := &Store{
		opts:          opts,
		log:           opts.Logger.With("component", "storage/embedded"),
		queue:         make(chan *writeReq, queueSize),
		paceWake:      make(chan struct{}, 1),
		stop:          make(chan struct{}),
		committerDone: make(chan struct{}),
		reqs:          sync.Pool{New: newWriteReq},
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.space = newSpace(opts.FS, dir, opts.ReserveBytes, opts.QuotaBytes, s.log)
	s.fs, s.healthChecks = s.healthCheckedFS(opts.FS)

	db, err := openPebble(dir, s.pebbleOptions())
	if err != nil {
		s.cancel(err)
		s.healthChecks.Close()
		return nil, fmt.Errorf("embedded: open %s: %w", dir, err)
	}
	s.db = db
	rev, err := s.initialize()
	var used int64
	if err == nil {
		used, err = measureData(db)
	}
	if err != nil {
		s.cancel(err)
		return nil, errors.Join(fmt.Errorf("embedded: open %s: %w", dir, err), s.closeDB())
	}
	s.space.used.Store(used)
	s.hist = newHistory(opts.History, opts.HistoryBytes, rev)
	s.committed.Store(rev)
	s.applied.Store(rev)
	s.expiry.init()
	go s.runCommitter(rev)
	s.background.Add(1)
	go s.runReaper()
	free, freeText := s.space.free(), "unknown"
	if free >= 0 {
		freeText = bytesString(free)
	}
	s.log.Info("opened", "dir", dir, "revision", rev, "data", bytesString(used), "quota", bytesString(opts.QuotaBytes),
		"free", freeText, "reserve", bytesString(opts.ReserveBytes))
	if free >= 0 && free < opts.ReserveBytes {
		s.log.Warn("the data directory's filesystem has less free space than the storage reserve: writes other than deletes will be refused until there is more",
			"free", bytesString(free), "reserve", bytesString(opts.ReserveBytes))
	}
	return s, nil
}

// openPebble opens pebble, turning a Fatalf during recovery into an error.
func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer recoverFatal(&err)
	return pebble.Open(dir, o)
}

// initialize checks or writes the format marker and reads the revision.
func (s *Store) initialize() (int64, error) {
	format, err := s.getRaw(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// A new store, unless something else lives here.
		it, err := s.db.NewIter(nil)
		if err != nil {
			return 0, err
		}
		nonEmpty := it.First()
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return 0, err
		}
		if nonEmpty {
			return 0, errors.New("directory holds a pebble database that is not a leasehold store")
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := errors.Join(b.Set(formatKey, []byte(formatVersion), nil), b.Set(revisionKey, encodeRevision(0), nil)); err != nil {
			return 0, err
		}
		if err := s.commitBatch(b); err != nil {
			return 0, err
		}
		return 0, nil
	case err != nil:
		return 0, err
	case string(format) == formatVersionV1:
		// Its records are version 2 records; marking it keeps older
		// builds, which cannot read expiring records, off it.
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Set(formatKey, []byte(formatVersion), nil); err != nil {
			return 0, err
		}
		if err := s.commitBatch(b); err != nil {
			return 0, err
		}
		s.log.Info("upgraded the on-disk format", "from", formatVersionV1, "to", formatVersion)
	case string(format) != formatVersion:
		return 0, fmt.Errorf("unsupported on-disk format %q (this build reads %q and %q)", format, formatVersionV1, formatVersion)
	}
	raw, err := s.getRaw(revisionKey)
	if err != nil {
		return 0, fmt.Errorf("reading the store revision: %w", err)
	}
	return decodeRevision(raw)
}

// getRaw returns a copy of the value of a pebble key.
func (s *Store) getRaw(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// Revision returns the newest committed revision. Every write acknowledged
// before the call is at or below it, since writes are acknowledged only
// after their batch is durable and committed has advanced.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return s.committed.Load(), nil
}

// Err returns nil while the store is healthy. After a failed commit (the
// store is then fail-stop) or after Close, it returns an error wrapping
// storage.ErrUnavailable that says why.
func (s *Store) Err() error {
	if cause := context.Cause(s.ctx); cause != nil {
		return unavailable(cause)
	}
	return nil
}

// Done is closed when the store stops serving: after a fatal failure or
// Close. A server can watch it to stop reporting ready, or to exit.
func (s *Store) Done() <-chan struct{} { return s.ctx.Done() }

// unavailable wraps cause as storage.ErrUnavailable, keeping cause
// inspectable with errors.Is.
func unavailable(cause error) error {
	if errors.Is(cause, storage.ErrUnavailable) {
		return cause
	}
	return fmt.Errorf("%w: %w", storage.ErrUnavailable, cause)
}

// check returns the error an operation must fail with before it starts:
// the store's failure, or ctx's.
func (s *Store) check(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// fail puts the store in fail-stop: the first cause wins, every later
// operation fails with it, watchers end, and waiters wake. The committer
// keeps draining the queue, failing each request, until Close.
func (s *Store) fail(cause error) {
	if context.Cause(s.ctx) == nil {
		s.log.Error("storage failed; refusing all further requests", "err", cause)
	}
	s.cancel(cause)
}

// Close stops the store. Writes already queued are committed (or failed, if
// the store has failed) and answered; later calls fail with an error
// wrapping storage.ErrUnavailable; open watches end with such an error.
// Close waits for the committer and every watcher goroutine, then closes
// pebble. Calling Close again returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		// No writer can enqueue now: let the committer finish the queue.
		close(s.stop)
		<-s.committerDone
		s.cancel(errClosed)
		s.watchers.Wait()
		s.background.Wait()
		s.snapshots.Wait()
		s.closeErr = s.closeDB()
		s.log.Info("closed", "revision", s.committed.Load())
	})
	return s.closeErr
}

func (s *Store) closeDB() (err error) {
	defer s.healthChecks.Close()
	defer recoverFatal(&err)
	return s.db.Close()
}

// rlock takes the read side of mu for an operation, failing if the store
// is closed or failed.
func (s *Store) rlock(ctx context.Context) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return unavailable(errClosed)
	}
	if err := s.check(ctx); err != nil {
		s.mu.RUnlock()
		return err
	}
	return nil
}
