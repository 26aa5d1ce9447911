package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// slowDiskThreshold is how long a single disk operation may take before
// pebble reports the disk as slow (pebble's own default).
const slowDiskThreshold = 5 * time.Second

// repeatLogInterval is the least time between two log lines of one kind of
// engine event that can repeat in a loop: pebble retries a failing flush
// at once, and reports a stalled disk operation again and again.
const repeatLogInterval = 30 * time.Second

// pebbleOptions returns pebble's configuration. Everything not set here is
// pebble's default.
func (s *Store) pebbleOptions() *pebble.Options {
	o := &pebble.Options{
		FS:           s.fs,
		MemTableSize: s.opts.MemTableSize,
		CacheSize:    s.opts.CacheSize,
		// Pinned rather than FormatNewest, so that upgrading pebble never
		// ratchets the on-disk format by accident. This version has WAL sync
		// chunks, which let recovery tell a torn tail write from corruption,
		// and checksummed sstable footers.
		FormatMajorVersion: pebble.FormatTableFormatV6,
		Logger:             &pebbleLogger{log: s.opts.Logger.With("component", "storage/pebble"), fail: s.fail},
		EventListener: &pebble.EventListener{
			BackgroundError: s.backgroundError,
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				s.log.Warn("pebble write stall", "reason", info.Reason)
			},
			WriteStallEnd: func() {
				s.log.Info("pebble write stall ended")
			},
		},
	}
	return o
}

// healthCheckedFS wraps fs with pebble's disk health checks, which report
// operations slower than slowDiskThreshold as DiskSlow events; closing the
// returned closer stops them (after pebble is closed).
func (s *Store) healthCheckedFS(fs vfs.FS) (vfs.FS, io.Closer) {
	return vfs.WithDiskHealthChecks(fs, slowDiskThreshold, nil, func(info vfs.DiskSlowInfo) {
		s.slowDiskLog.log(s.log, slog.LevelWarn, "slow disk: an operation has taken longer than "+slowDiskThreshold.String(), "info", info.String())
	})
}

// backgroundError handles a failure of pebble's background work (flushes,
// compactions), which pebble retries:
//
//   - the disk full (which the reserve should prevent, unless another
//     process took the space): puts are refused until there is room again,
//     and pebble's retries succeed once there is;
//   - an I/O error (EIO, or a filesystem turned read-only after errors):
//     the disk cannot be trusted, and the store fails as after a failed
//     commit (see the package documentation);
//   - anything else is logged, at most once per repeatLogInterval.
func (s *Store) backgroundError(err error) {
	switch {
	case isNoSpace(err):
		s.space.setFull(s.space.diskFull(max(s.space.free(), 0)), true, 0)
		s.bgErrorLog.log(s.log, slog.LevelWarn, "pebble could not write: the filesystem is full; it retries, and puts are refused until there is room", "err", err)
	case isIOError(err):
		s.fail(fmt.Errorf("I/O error in pebble's background work: %w", err))
	default:
		s.bgErrorLog.log(s.log, slog.LevelError, "pebble background error", "err", err)
	}
}

// isIOError reports whether err is the disk or the filesystem failing.
func isIOError(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// logLimiter logs one kind of repeating event at most once per
// repeatLogInterval, saying how many were left out in between.
type logLimiter struct {
	mu         sync.Mutex // guards the fields below
	last       time.Time
	suppressed int
}

func (l *logLimiter) log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	l.mu.Lock()
	if time.Since(l.last) < repeatLogInterval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.last = time.Now()
	if l.suppressed > 0 {
		args = append(args, "repeats_not_logged", l.suppressed)
	}
	l.suppressed = 0
	l.mu.Unlock()
	log.Log(context.Background(), level, msg, args...)
}

// pebbleLogger adapts pebble's logger to slog.
//
// Pebble calls Fatalf when it cannot continue safely, most importantly when
// a commit or its WAL fsync fails, and its own default then exits the
// process: pebble's commit pipeline is broken after that point, and
// DB.Apply even returns nil once Fatalf returns. So Fatalf here first puts
// the store in fail-stop, then panics with a fatalError. On the
// committer's goroutine (and in Open and Close) recoverFatal turns that
// panic back into an error, so the store fails cleanly without acknowledging
// the batch. On pebble's own background goroutines nothing recovers it and
// the process crashes, which is what pebble requires there (a failed
// MANIFEST write must not be followed by deleting the WAL it protects);
// recovery then happens at the next Open.
type pebbleLogger struct {
	log  *slog.Logger
	fail func(error)
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return "pebble: fatal: " + e.msg }

// Infof logs at debug level: pebble's informational messages (one per WAL
// file replayed at start, and the like) are about its internals, not
// about leasehold's state.
func (l *pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, args...))
	}
}

func (l *pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...))
}

func (l *pebbleLogger) Fatalf(format string, args ...any) {
	err := &fatalError{msg: fmt.Sprintf(format, args...)}
	l.log.Error("pebble fatal error", "err", err.msg)
	l.fail(err)
	panic(err)
}

// recoverFatal, deferred, turns a pebbleLogger.Fatalf panic into *err.
// Other panics continue.
func recoverFatal(err *error) {
	if r := recover(); r != nil {
		fe, ok := r.(*fatalError)
		if !ok {
			panic(r)
		}
		*err = fe
	}
}

// commitBatch commits b durably: it returns once the WAL holding b has been
// fsync'd, or with an error if that failed (pebble's Fatalf included).
func (s *Store) commitBatch(b *pebble.Batch) (err error) {
	defer recoverFatal(&err)
	return b.Commit(pebble.Sync)
}
