package embedded

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleOptions returns pebble's configuration. Everything not set here is
// pebble's default.
func (s *Store) pebbleOptions() *pebble.Options {
	o := &pebble.Options{
		FS:           s.opts.fs,
		MemTableSize: s.opts.MemTableSize,
		CacheSize:    s.opts.CacheSize,
		// Pinned rather than FormatNewest, so that upgrading pebble never
		// ratchets the on-disk format by accident. This version has WAL sync
		// chunks, which let recovery tell a torn tail write from corruption,
		// and checksummed sstable footers.
		FormatMajorVersion: pebble.FormatTableFormatV6,
		Logger:             &pebbleLogger{log: s.log.With("component", "pebble"), fail: s.fail},
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) {
				s.log.Error("pebble background error", "err", err)
			},
			DiskSlow: func(info pebble.DiskSlowInfo) {
				s.log.Warn("slow disk", "info", info.String())
			},
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

func (l *pebbleLogger) Infof(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...))
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
