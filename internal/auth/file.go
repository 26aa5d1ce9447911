package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often watched files are checked for
// changes.
const DefaultReloadInterval = time.Second

// fullCheckEvery is how many checks pass between two reads of a file
// whose size and modification time did not change: edits that keep both
// (or a file system with coarse timestamps) are still noticed.
const fullCheckEvery = 30

// Reload configures how a file is watched for changes.
type Reload struct {
	// Interval between two checks; DefaultReloadInterval when 0.
	Interval time.Duration
	// Logger receives the outcome of reloads; nil discards.
	Logger *slog.Logger
}

func (r Reload) withDefaults() Reload {
	if r.Interval <= 0 {
		r.Interval = DefaultReloadInterval
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r
}

// fileSource holds the value parsed from a file, and parses the file again
// when its content changes. Readers call get, which never blocks; one
// goroutine calls Run.
type fileSource[T any] struct {
	path   string
	what   string // "token file", for messages
	parse  func([]byte) (T, error)
	reload Reload
	cur    atomic.Pointer[T]

	// The fields below belong to the goroutine that calls check:
	// newFileSource, then Run.
	info    os.FileInfo
	sum     [32]byte
	ticks   int
	lastErr string
}

// newFileSource reads and parses path; a file that cannot be read or
// parsed is an error.
func newFileSource[T any](path, what string, parse func([]byte) (T, error), reload Reload) (*fileSource[T], error) {
	s := &fileSource[T]{path: path, what: what, parse: parse, reload: reload.withDefaults()}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	v, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	s.info, s.sum = info, sha256.Sum256(data)
	s.cur.Store(&v)
	return s, nil
}

// get returns the current value.
func (s *fileSource[T]) get() T { return *s.cur.Load() }

// Run checks the file for changes every interval until ctx ends.
func (s *fileSource[T]) Run(ctx context.Context) error {
	t := time.NewTicker(s.reload.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.check()
		}
	}
}

// check re-reads the file when its size, modification time or identity
// changed, or every fullCheckEvery calls, and swaps in the new value when
// the content changed and parses. A bad file keeps the old value.
func (s *fileSource[T]) check() {
	s.ticks++
	info, err := os.Stat(s.path)
	if err != nil {
		s.fail(err)
		return
	}
	same := s.info != nil && os.SameFile(info, s.info) && info.Size() == s.info.Size() && info.ModTime().Equal(s.info.ModTime())
	if same && s.ticks%fullCheckEvery != 0 {
		return
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		s.fail(err)
		return
	}
	s.info = info
	sum := sha256.Sum256(data)
	if sum == s.sum {
		return
	}
	// A content that fails to parse is not parsed again until it changes.
	s.sum = sum
	v, err := s.parse(data)
	if err != nil {
		s.fail(err)
		return
	}
	s.cur.Store(&v)
	s.lastErr = ""
	s.reload.Logger.Info("reloaded "+s.what, "path", s.path)
}

// fail logs a failed reload once per distinct error.
func (s *fileSource[T]) fail(err error) {
	if msg := err.Error(); msg != s.lastErr {
		s.lastErr = msg
		s.reload.Logger.Error("cannot reload "+s.what+"; keeping the previous content", "path", s.path, "err", err)
	}
}
