package h2server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

var errBodyClosed = errors.New("http2: request body closed due to handler exiting")

// stream is one request and its response.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelCauseFunc
	// req is the request of a stream waiting for a handler slot, and
	// headerBytes the size of its header fields.
	req         *http.Request
	headerBytes int
	// tooLarge: the header list was cut at MAX_HEADER_LIST_SIZE (431).
	tooLarge bool

	// Guarded by c.mu.
	remoteDone bool // the client ended its side (END_STREAM)
	localDone  bool // the response is complete (END_STREAM sent)
	removed    bool // no longer among the connection's open streams

	// Guarded by c.wmu.
	sendWindow int64
	werr       error // why writes fail now
	endSent    bool  // END_STREAM or RST_STREAM sent

	// The request body, guarded by mu.
	mu    sync.Mutex
	cond  sync.Cond
	data  []byte
	datap *[]byte // data's pooled buffer
	off   int
	// rerr is io.EOF once the body is complete, or why reads fail.
	rerr       error
	bodyClosed bool
	// recvWindow is what the client may still send on the stream;
	// unacked is what the handler read since the last WINDOW_UPDATE.
	recvWindow   int32
	unacked      int32
	declared     int64 // Content-Length, -1 when none
	got          int64
	needContinue bool
	// readDeadline ends body reads; readTimer enforces it, armed only
	// once a read has to wait (most bodies are whole before their
	// handler reads them: a timer a request would be for nothing).
	readDeadline  time.Time
	readTimer     *time.Timer
	writeTimer    *time.Timer
	body          requestBody
	timersStopped bool
}

func newStream(c *conn, id uint32, ended bool) *stream {
	ctx, cancel := context.WithCancelCause(c.ctx)
	st := &stream{c: c, id: id, ctx: ctx, cancel: cancel, recvWindow: streamWindow, declared: -1}
	st.cond.L = &st.mu
	st.body.st = st
	if ended {
		st.remoteDone = true
		st.rerr = io.EOF
	}
	return st
}

// receive takes a DATA frame's data (size with its padding, which the
// caller gave back to the connection's window) for the body.
func (st *stream) receive(data []byte, size int32, end bool) error {
	st.mu.Lock()
	if size > st.recvWindow {
		st.mu.Unlock()
		st.c.returnWindow(len(data))
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeFlowControl}
	}
	st.recvWindow -= size
	st.got += int64(len(data))
	if st.declared >= 0 && (st.got > st.declared || end && st.got != st.declared) {
		st.mu.Unlock()
		st.c.returnWindow(len(data))
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol, Cause: errors.New("request body length differs from its Content-Length")}
	}
	if st.bodyClosed || st.rerr != nil {
		// Nobody reads it: the connection's window comes back at once.
		st.mu.Unlock()
		st.c.returnWindow(len(data))
		return nil
	}
	if len(data) > 0 {
		if st.datap == nil {
			st.datap = getBuffer(&bodyBuffers)
			st.data = (*st.datap)[:0]
		}
		if st.off == len(st.data) {
			st.data, st.off = st.data[:0], 0
		}
		st.data = append(st.data, data...)
	}
	if end {
		st.rerr = io.EOF
	}
	st.cond.Broadcast()
	st.mu.Unlock()
	return nil
}

// endBody ends the body at trailers.
func (st *stream) endBody() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.declared >= 0 && st.got != st.declared {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if st.rerr == nil {
		st.rerr = io.EOF
	}
	st.cond.Broadcast()
	return nil
}

// failBody makes reads of the body fail with err from now on, but for
// what was already received.
func (st *stream) failBody(err error) {
	st.mu.Lock()
	if st.rerr == nil {
		st.rerr = err
	}
	st.cond.Broadcast()
	st.mu.Unlock()
}

// resetBody is the stream's end before its body's: reads fail with err
// at once, and what was received and not read goes back to the
// connection's window now, whether or not a handler ever runs (a
// queued stream's never does).
func (st *stream) resetBody(err error) {
	st.mu.Lock()
	unread := st.abandonLocked(err)
	st.mu.Unlock()
	st.c.returnWindow(unread)
}

// closeBody is the handler giving up the body: what it did not read goes
// back to the connection's window.
func (st *stream) closeBody() {
	st.mu.Lock()
	if st.bodyClosed {
		st.mu.Unlock()
		return
	}
	st.bodyClosed = true
	unread := st.abandonLocked(errBodyClosed)
	st.mu.Unlock()
	st.c.returnWindow(unread)
}

// abandonLocked makes reads fail with err (unless they already end
// otherwise), frees the received data and says how much of it was not
// read: the caller gives that back to the connection's window.
func (st *stream) abandonLocked(err error) int {
	if st.rerr == nil {
		st.rerr = err
	}
	unread := len(st.data) - st.off
	if st.datap != nil {
		putBuffer(&bodyBuffers, st.datap, st.data, 4*bufSize)
	}
	st.data, st.datap, st.off = nil, nil, 0
	st.cond.Broadcast()
	return unread
}

func (st *stream) read(p []byte) (int, error) {
	st.mu.Lock()
	if st.needContinue {
		st.needContinue = false
		st.mu.Unlock()
		st.c.writeContinue(st)
		st.mu.Lock()
	}
	for st.off == len(st.data) && st.rerr == nil {
		if !st.readDeadline.IsZero() && st.readTimer == nil && !st.timersStopped {
			st.readTimer = time.AfterFunc(time.Until(st.readDeadline), st.readTimedOut)
		}
		st.cond.Wait()
	}
	if st.off == len(st.data) || st.bodyClosed {
		err := st.rerr
		if st.bodyClosed {
			err = errBodyClosed
		}
		st.mu.Unlock()
		return 0, err
	}
	n := copy(p, st.data[st.off:])
	st.off += n
	// The stream's window matters only while the client sends.
	var streamIncr int32
	if st.rerr == nil {
		st.unacked += int32(n)
		if st.unacked >= streamWindow/4 {
			streamIncr = st.unacked
			st.recvWindow += streamIncr
			st.unacked = 0
		}
	}
	st.mu.Unlock()
	if streamIncr > 0 {
		st.c.sendWindowUpdate(st.id, uint32(streamIncr))
	}
	st.c.returnWindow(n)
	return n, nil
}

// setReadDeadline fails body reads after t, as net/http's HTTP/2 server
// does; the zero time clears it.
func (st *stream) setReadDeadline(t time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timersStopped {
		return
	}
	st.readDeadline = t
	if st.readTimer != nil {
		st.readTimer = resetTimer(st.readTimer, t, st.readTimedOut)
	}
}

func (st *stream) readTimedOut() { st.failBody(os.ErrDeadlineExceeded) }

// setWriteDeadline resets the stream when t passes, as net/http's HTTP/2
// server does; the zero time clears it.
func (st *stream) setWriteDeadline(t time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timersStopped {
		return
	}
	st.writeTimer = resetTimer(st.writeTimer, t, func() {
		st.c.resetStream(st, http2.ErrCodeInternal, os.ErrDeadlineExceeded, true)
	})
}

func (st *stream) stopTimers() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.timersStopped = true
	for _, t := range []*time.Timer{st.readTimer, st.writeTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// resetTimer arms t (made with f when nil) to fire at deadline, or
// stops it for the zero time.
func resetTimer(t *time.Timer, deadline time.Time, f func()) *time.Timer {
	if deadline.IsZero() {
		if t != nil {
			t.Stop()
		}
		return t
	}
	d := time.Until(deadline)
	if t == nil {
		return time.AfterFunc(d, f)
	}
	t.Reset(d)
	return t
}

// requestBody is a request's Body.
type requestBody struct{ st *stream }

func (b *requestBody) Read(p []byte) (int, error) { return b.st.read(p) }

func (b *requestBody) Close() error {
	b.st.closeBody()
	return nil
}
