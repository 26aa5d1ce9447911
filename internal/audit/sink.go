package audit

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// DefaultBufferBytes is how many bytes of encoded events may wait to be
// written: a few seconds of a busy server's events at Metadata level.
const DefaultBufferBytes = 32 << 20

// maxChunk is the most one write hands the file: whole lines, so that the
// rotating file never gets a write larger than its maximum size.
const maxChunk = 1 << 20

// dropReportEvery is how often dropped events are counted in the log.
const dropReportEvery = 10 * time.Second

// The writer lets events gather for flushDelay after the first one before
// writing them, or until flushBytes of them wait: one write for many
// events, and no wake-up of the writer for each (which cost more than
// encoding them). An event reaches the file at most flushDelay late.
const (
	flushDelay = 20 * time.Millisecond
	flushBytes = 256 << 10
)

// sink buffers encoded events and writes them to out from the goroutine
// of Run. Adding never blocks: an event that does not fit the buffer is
// dropped and counted.
type sink struct {
	out io.Writer
	max int
	log *slog.Logger

	// mu guards the fields below. It is held only to append to or swap
	// buf, never while writing.
	mu  sync.Mutex
	buf []byte
	// dropped counts events dropped since the last report; lost those a
	// failed write lost.
	dropped, lost int64

	// wake has room for one signal: buf has its first event since the
	// last write, or flushBytes of them.
	wake chan struct{}
}

func newSink(out io.Writer, maxBytes int, log *slog.Logger) *sink {
	return &sink{out: out, max: maxBytes, log: log, wake: make(chan struct{}, 1)}
}

// add appends one encoded event, or drops it when the buffer is full.
func (s *sink) add(line []byte) {
	s.mu.Lock()
	if len(s.buf)+len(line) > s.max {
		s.dropped++
		s.mu.Unlock()
		return
	}
	first := len(s.buf) == 0
	s.buf = append(s.buf, line...)
	full := len(s.buf) >= flushBytes && len(s.buf)-len(line) < flushBytes
	s.mu.Unlock()
	if first || full {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// waiting is how many bytes wait to be written.
func (s *sink) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

// Run writes buffered events until ctx ends, then writes what is left
// (giving up after flushTimeout, when the disk does not take it).
func (s *sink) Run(ctx context.Context, flushTimeout time.Duration) error {
	report := time.NewTicker(dropReportEvery)
	defer report.Stop()
	var spare []byte
	for {
		select {
		case <-ctx.Done():
			done := make(chan struct{})
			go func() { // stuck only on a disk that takes no writes
				defer close(done)
				s.flush(nil)
				s.report()
			}()
			select {
			case <-done:
			case <-time.After(flushTimeout):
				s.log.Error("audit log: shutting down with events not written; the disk takes no writes")
			}
			return nil
		case <-s.wake:
			if s.waiting() < flushBytes {
				// Let more events gather, unless the buffer fills first.
				t := time.NewTimer(flushDelay)
				select {
				case <-t.C:
				case <-s.wake:
				case <-ctx.Done():
				}
				t.Stop()
			}
			spare = s.flush(spare)
		case <-report.C:
			s.report()
		}
	}
}

// flush writes the buffer, swapping in spare (an emptied buffer to reuse)
// so that events keep arriving meanwhile; it returns the written buffer
// for the next swap.
func (s *sink) flush(spare []byte) []byte {
	s.mu.Lock()
	all := s.buf
	s.buf = spare[:0]
	s.mu.Unlock()
	b := all
	for len(b) > 0 {
		n := len(b)
		if n > maxChunk {
			n = lastLineEnd(b[:maxChunk])
			if n == 0 { // one event larger than a chunk
				n = firstLineEnd(b)
			}
		}
		if _, err := s.out.Write(b[:n]); err != nil {
			left := countLines(b)
			s.mu.Lock()
			s.lost += int64(left)
			s.mu.Unlock()
			s.log.Error("audit log: writing events failed; they are lost", "events", left, "err", err)
			break
		}
		b = b[n:]
	}
	// The whole buffer, not what is left of b (nothing, at the end of
	// it): reused, it spares the requests growing a new one.
	return all[:0]
}

// report logs how many events were dropped or lost since the last
// report, if any.
func (s *sink) report() {
	s.mu.Lock()
	dropped, lost := s.dropped, s.lost
	s.dropped, s.lost = 0, 0
	s.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("audit log: events dropped, the buffer was full: the log file is not written as fast as requests arrive (a slow or full disk?); the requests were served",
			"dropped", dropped, "buffer_bytes", s.max)
	}
	if lost > 0 {
		s.log.Warn("audit log: events lost to failed writes", "lost", lost)
	}
}

func lastLineEnd(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i + 1
		}
	}
	return 0
}

func firstLineEnd(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i + 1
		}
	}
	return len(b)
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
