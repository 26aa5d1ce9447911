package h2server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Flow-control windows this server gives clients.
const (
	// streamWindow is each stream's receive window (request bodies),
	// net/http's default.
	streamWindow = 1 << 20
	// connWindow is the connection's receive window: at most this much
	// of request bodies waits unread for all of a connection's handlers.
	connWindow = 1 << 20
	// initialWindow is HTTP/2's window before SETTINGS.
	initialWindow = 65535
	// maxReadFrame is the largest frame clients may send: HTTP/2's
	// default, not raised (a large body is a rare request here).
	maxReadFrame = 16384
)

var (
	errConnClosed   = errors.New("h2server: connection closed")
	errStreamDone   = errors.New("h2server: the response is complete")
	errBadPreface   = errors.New("h2server: the client's connection preface is not HTTP/2's")
	errStreamReset  = errors.New("h2server: stream reset by the client")
	errHandlerPanic = errors.New("h2server: handler panicked")
)

// conn is one HTTP/2 connection. Its serve goroutine reads and handles
// every frame; handlers write their responses themselves (write.go).
//
// Lock order: mu, then a stream's mu, then wmu.
type conn struct {
	srv        *Server
	nc         net.Conn
	handler    http.Handler
	ctx        context.Context
	cancel     context.CancelFunc
	tlsState   *tls.ConnectionState
	remoteAddr string
	maxStreams uint32

	// The serve goroutine's own.
	fr                *http2.Framer
	hb                headerBlockReader
	decoded           decodedHeaders
	peerInitialWindow int32
	canonCache        map[string]string
	// refusedHeaders counts the header blocks answered 431.
	refusedHeaders int

	// errored: a ClientError was reported; only the first is logged.
	errored atomic.Bool
	// heldUntil, when set, is when the hold of a client past a bound
	// ends (UnixNano); nothing more of it is read meanwhile (limits.go).
	heldUntil atomic.Int64
	// closed is closed by closeNow: it ends a hold early (shutdown).
	closed    chan struct{}
	closeOnce sync.Once

	mu sync.Mutex // guards the fields below
	// streams are the open ones, counted against MAX_CONCURRENT_STREAMS.
	streams     map[uint32]*stream
	maxClientID uint32
	// handlers counts running handlers, those of reset streams too, so
	// that a client resetting streams as fast as it opens them (the
	// "rapid reset" attack) cannot run more than maxStreams at once;
	// the others wait in queued.
	handlers int
	queued   []*stream
	// queuedHeaderBytes are the header bytes of the requests in queued.
	queuedHeaderBytes int
	// running counts the handlers started, for teardown to wait for.
	running         sync.WaitGroup
	unackedSettings int
	goingAway       bool
	closing         bool
	idle            *time.Timer
	// recvWindow is what the client may still send on the connection:
	// the window of the WINDOW_UPDATEs being written or written, not
	// merely queued (a client cannot know of one we could not send).
	// returned is what
	// handlers consumed since the last WINDOW_UPDATE.
	recvWindow int32
	returned   int32

	wmu    sync.Mutex // guards the write side (write.go)
	wcond  sync.Cond
	out    []byte  // frames not yet written
	outBuf *[]byte // out's pooled buffer
	// queuedBytes and writtenBytes count what entered out and what
	// reached the connection, for writers waiting for their frames.
	queuedBytes, writtenBytes int64
	flushing                  bool
	werr                      error
	sendWindow                int64
	peerMaxFrame              uint32
	// outControl counts the control frames in out, writingControl those
	// in the write under way (limits.go).
	outControl, writingControl int
	// outGrant is the connection window the WINDOW_UPDATEs in out give:
	// it joins recvWindow once their write begins.
	outGrant int32
	// waitingBytes is what answers hold while they wait for window;
	// waitingResets counts the streams reset for passing the bound.
	waitingBytes  int64
	waitingResets int
	henc          *hpack.Encoder
	hbuf          bytes.Buffer
	wdeadline     time.Time
	// cork, when the connection came from a Listener, holds the TLS
	// records of a large write for one system call (cork.go).
	cork *corkConn
}

// newConn serves HTTP/2 on nc, whose TLS state (shared by its requests)
// is state.
func newConn(s *Server, nc net.Conn, state *tls.ConnectionState, h http.Handler, base context.Context) *conn {
	ctx, cancel := context.WithCancel(base)
	c := &conn{
		srv:               s,
		nc:                nc,
		handler:           h,
		ctx:               ctx,
		cancel:            cancel,
		tlsState:          state,
		remoteAddr:        nc.RemoteAddr().String(),
		maxStreams:        s.maxStreams(),
		peerInitialWindow: initialWindow,
		streams:           map[uint32]*stream{},
		recvWindow:        initialWindow,
		sendWindow:        initialWindow,
		peerMaxFrame:      16384,
		closed:            make(chan struct{}),
	}
	c.wcond.L = &c.wmu
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.fr = http2.NewFramer(nil, nc)
	c.fr.SetReuseFrames()
	c.hb.init()
	c.fr.SetMaxReadFrameSize(maxReadFrame)
	return c
}

// maxHeaderListSize is what is advertised: the header bytes plus the
// per-field overhead HTTP/2 counts for ten typical fields, as net/http.
func (c *conn) maxHeaderListSize() uint32 {
	return c.srv.maxHeaderBytes() + 10*32
}

func (c *conn) serve() {
	defer c.teardown()
	c.wmu.Lock()
	c.appendSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.maxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.maxHeaderListSize()},
	)
	c.appendWindowUpdate(0, connWindow-initialWindow)
	err := c.flushLocked(false)
	c.wmu.Unlock()
	c.mu.Lock()
	c.unackedSettings++
	c.mu.Unlock()
	if err != nil {
		return
	}

	_ = c.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	if err := c.readPreface(); err != nil {
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &ce):
			c.connError(http2.ErrCode(ce), err)
		case errors.Is(err, errBadPreface):
			c.srv.logf("http2: %s: %v", c.remoteAddr, err)
		}
		return
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	if c.srv.IdleTimeout > 0 {
		c.mu.Lock()
		c.idle = time.AfterFunc(c.srv.IdleTimeout, func() { c.goAway(http2.ErrCodeNo) })
		c.mu.Unlock()
	}
	for {
		if c.heldOff() {
			return
		}
		f, err := c.readFrame()
		if err == nil {
			err = c.processFrame(f)
		}
		if err == nil {
			continue
		}
		if c.heldOff() {
			return
		}
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			if se.Code != http2.ErrCodeStreamClosed {
				// A frame crossing a stream's end is no attack.
				c.clientError(kindOf(err), err)
			}
			c.streamError(se)
		case errors.As(err, &ce):
			kind := kindOf(err)
			c.clientError(kind, err)
			if kind != KindProtocol {
				// An attack's GOAWAY waits: the client would open the
				// next connection as soon as it reads it. Then it has
				// closeDelay to be written (writes may be stalled).
				c.hold(false)
				c.heldOff()
				time.AfterFunc(closeDelay, c.closeNow)
			}
			c.connError(http2.ErrCode(ce), err)
			return
		default:
			// The connection is gone (EOF, a reset, a close by us).
			return
		}
	}
}

// readFrame reads the next frame. One larger than we allow is the
// connection error RFC 9113 (4.2) makes it.
func (c *conn) readFrame() (http2.Frame, error) {
	f, err := c.fr.ReadFrame()
	if errors.Is(err, http2.ErrFrameTooLarge) {
		err = http2.ConnectionError(http2.ErrCodeFrameSize)
	}
	return f, err
}

// readPreface reads the client's connection preface: the fixed string,
// then a SETTINGS frame. What the client got wrong in that frame is an
// http2.ConnectionError in the error returned.
func (c *conn) readPreface() error {
	buf := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return fmt.Errorf("reading the client preface: %w", err)
	}
	if string(buf) != http2.ClientPreface {
		return errBadPreface
	}
	f, err := c.readFrame()
	if err != nil {
		return fmt.Errorf("reading the client's first SETTINGS: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("the client's first frame is not SETTINGS: %w", http2.ConnectionError(http2.ErrCodeProtocol))
	}
	if err := c.processSettings(sf); err != nil {
		return fmt.Errorf("the client's first SETTINGS: %w", err)
	}
	return nil
}

func (c *conn) processFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		done, err := c.hb.headers(f, c.maxHeaderListSize(), &c.decoded)
		if !done || err != nil {
			return err
		}
		return c.processHeaders(&c.decoded)
	case *http2.ContinuationFrame:
		done, err := c.hb.continuation(f, c.maxHeaderListSize(), &c.decoded)
		if !done || err != nil {
			return err
		}
		return c.processHeaders(&c.decoded)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil // this server sends no pings
		}
		c.wmu.Lock()
		c.appendControl(http2.FramePing, http2.FlagPingAck, f.Data[:]...)
		err := c.flushLocked(false)
		c.wmu.Unlock()
		return err
	case *http2.RSTStreamFrame:
		return c.processReset(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return nil
	case *http2.GoAwayFrame:
		if f.ErrCode != http2.ErrCodeNo {
			c.srv.logf("http2: %s: the client sent GOAWAY %v: %q", c.remoteAddr, f.ErrCode, f.DebugData())
		}
		c.goAway(http2.ErrCodeNo)
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	default:
		// Unknown types are ignored (RFC 9113, 5.5).
		return nil
	}
}

// lookup finds an open stream; idle reports that the client never
// opened id (frames on idle streams are connection errors).
func (c *conn) lookup(id uint32) (st *stream, idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id], id > c.maxClientID
}

func (c *conn) processHeaders(f *decodedHeaders) error {
	id := f.stream
	if id%2 != 1 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if f.prio && f.priority.StreamDep == id {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if f.truncated {
		if c.refusedHeaders++; c.refusedHeaders > maxRefusedHeaders {
			return flood(errHeaderBombs)
		}
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		c.mu.Unlock()
		return c.processTrailers(st, f)
	}
	if id <= c.maxClientID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxClientID = id
	if c.goingAway {
		// Past the GOAWAY's last stream: ignored, the client retries
		// it on a new connection.
		c.mu.Unlock()
		return nil
	}
	if uint32(len(c.streams)) >= c.maxStreams {
		unacked := c.unackedSettings > 0
		c.mu.Unlock()
		if unacked {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	c.mu.Unlock()

	st := newStream(c, id, f.endStream)
	req, err := c.newRequest(st, f.fields)
	if err != nil {
		st.cancel(err)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: err}
	}
	st.sendWindow = int64(c.peerInitialWindow)
	st.tooLarge = f.truncated

	c.mu.Lock()
	c.streams[id] = st
	if c.idle != nil && len(c.streams) == 1 {
		c.idle.Stop()
	}
	start := true
	if c.handlers >= int(c.maxStreams) {
		if len(c.queued) >= 4*int(c.maxStreams) {
			c.mu.Unlock()
			return kindError{KindReset, errRapidReset, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)}
		}
		st.headerBytes = f.size
		if c.queuedHeaderBytes+st.headerBytes > maxQueuedHeaderBytes {
			c.mu.Unlock()
			return flood(errQueuedFlood)
		}
		c.queuedHeaderBytes += st.headerBytes
		st.req = req
		c.queued = append(c.queued, st)
		start = false
	} else {
		c.handlers++
	}
	c.mu.Unlock()
	if start {
		c.startHandler(st, req)
	}
	return nil
}

// processTrailers takes a request's trailers: they end its body. Their
// fields are not given to handlers (nothing here reads them).
func (c *conn) processTrailers(st *stream, f *decodedHeaders) error {
	c.mu.Lock()
	done := st.remoteDone
	c.mu.Unlock()
	if done {
		c.wmu.Lock()
		closed := st.endSent // both ways: only its removal is to come
		c.wmu.Unlock()
		if closed {
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed}
	}
	if !f.endStream || len(f.fields) > 0 && f.fields[0].IsPseudo() {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if err := st.endBody(); err != nil {
		return err
	}
	c.remoteEnded(st)
	return nil
}

func (c *conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	size := int32(f.Length) // padding included: it counts against windows
	data := f.Data()
	c.mu.Lock()
	if size > c.recvWindow {
		c.mu.Unlock()
		return kindError{KindFlood, errWindowOverrun, http2.ConnectionError(http2.ErrCodeFlowControl)}
	}
	c.recvWindow -= size
	st := c.streams[id]
	if st == nil || st.remoteDone {
		idle := id > c.maxClientID
		c.mu.Unlock()
		if idle {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.returnWindow(int(size))
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	c.mu.Unlock()
	if pad := int(size) - len(data); pad > 0 {
		c.returnWindow(pad)
	}
	if err := st.receive(data, size, f.StreamEnded()); err != nil {
		return err
	}
	if f.StreamEnded() {
		c.remoteEnded(st)
	}
	return nil
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	incr := int64(f.Increment)
	if f.StreamID == 0 {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.sendWindow+incr > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWindow += incr
		c.wcond.Broadcast()
		return nil
	}
	st, idle := c.lookup(f.StreamID)
	if idle {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st == nil {
		return nil // a closed stream's: it may cross our END_STREAM
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if st.sendWindow+incr > 1<<31-1 {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeFlowControl}
	}
	st.sendWindow += incr
	c.wcond.Broadcast()
	return nil
}

func (c *conn) processReset(f *http2.RSTStreamFrame) error {
	st, idle := c.lookup(f.StreamID)
	if idle {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st != nil {
		c.resetStream(st, http2.ErrCodeNo, errStreamReset, false)
	}
	return nil
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.unackedSettings == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.unackedSettings--
		return nil
	}
	if f.NumSettings() > 100 {
		// Not in the RFC: a client this talkative is not one.
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// The settings apply and their ACK is queued under one hold of the
	// write lock: a response a new window releases is written after the
	// ACK, as clients (h2spec's 6.9.2 among them) expect.
	c.mu.Lock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		case http2.SettingInitialWindowSize:
			return c.setInitialWindowLocked(int32(s.Val))
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		}
		return nil
	})
	c.mu.Unlock() // the streams' windows are set; not held while writing
	if err != nil {
		return err
	}
	c.appendControl(http2.FrameSettings, http2.FlagSettingsAck)
	c.wcond.Broadcast()
	return c.flushLocked(false)
}

// setInitialWindowLocked applies a new SETTINGS_INITIAL_WINDOW_SIZE to
// every open stream's send window (RFC 9113, 6.9.2), c.mu and c.wmu
// held; the caller wakes the writers.
func (c *conn) setInitialWindowLocked(v int32) error {
	delta := int64(v) - int64(c.peerInitialWindow)
	c.peerInitialWindow = v
	for _, st := range c.streams {
		if st.sendWindow+delta > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		st.sendWindow += delta
	}
	return nil
}

// startHandler runs the handler of st's request on a worker.
func (c *conn) startHandler(st *stream, req *http.Request) {
	c.running.Add(1)
	c.srv.pool.Run(func() {
		defer c.running.Done()
		c.runHandler(st, req)
	})
}

func (c *conn) runHandler(st *stream, req *http.Request) {
	rw := newResponseWriter(c, st, req)
	defer func() {
		p := recover()
		if p != nil {
			if p != http.ErrAbortHandler { //nolint:errorlint // sentinel panic value, as net/http compares it
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.logf("http2: panic serving %s: %v\n%s", c.remoteAddr, p, buf)
			}
			c.resetStream(st, http2.ErrCodeInternal, errHandlerPanic, true)
		} else {
			rw.finish()
			rw.release()
		}
		c.handlerDone(st)
	}()
	h := c.handler
	if st.tooLarge {
		h = http.HandlerFunc(headerListTooLong)
	}
	h.ServeHTTP(rw, req)
}

// headerListTooLong answers a request whose header list went past
// MAX_HEADER_LIST_SIZE, as net/http does.
func headerListTooLong(w http.ResponseWriter, _ *http.Request) {
	const body = "<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>"
	w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
	_, _ = io.WriteString(w, body)
}

// handlerDone notes the end of st's handler, and starts a queued
// handler in its place.
func (c *conn) handlerDone(st *stream) {
	st.closeBody()
	st.stopTimers()
	c.mu.Lock()
	c.handlers--
	var next *stream
	for len(c.queued) > 0 && next == nil {
		next = c.queued[0]
		c.queued = c.queued[1:]
		c.queuedHeaderBytes -= next.headerBytes
		if next.removed {
			next.req = nil
			next = nil
		}
	}
	if next != nil {
		c.handlers++
	}
	unfinished := !st.removed && !st.localDone
	closeConn := c.drainedLocked()
	c.mu.Unlock()
	if unfinished {
		// The response could not be completed (finish failed): the
		// stream cannot stay open without a handler.
		c.resetStream(st, http2.ErrCodeInternal, errStreamDone, true)
	}
	st.cancel(context.Canceled)
	if closeConn {
		c.closeSoon()
	}
	if next != nil {
		req := next.req
		next.req = nil
		c.startHandler(next, req)
	}
}

// localEnded notes that st's response is complete (END_STREAM sent). A
// client still sending a body nobody will read is told so (RFC 9113,
// 8.1): the stream is reset with NO_ERROR.
func (c *conn) localEnded(st *stream) {
	c.mu.Lock()
	if st.removed {
		c.mu.Unlock()
		return
	}
	st.localDone = true
	if st.remoteDone {
		closeConn := c.removeLocked(st)
		c.mu.Unlock()
		if closeConn {
			c.closeSoon()
		}
		return
	}
	c.mu.Unlock()
	c.resetStream(st, http2.ErrCodeNo, errStreamDone, true)
}

// remoteEnded notes the end of a request body; a stream whose response
// is also complete is then closed.
func (c *conn) remoteEnded(st *stream) {
	c.mu.Lock()
	st.remoteDone = true
	closeConn := false
	if st.localDone && !st.removed {
		closeConn = c.removeLocked(st)
	}
	c.mu.Unlock()
	if closeConn {
		c.closeSoon()
	}
}

// removeLocked takes st out of the open streams. It reports whether the
// connection, going away, has nothing left to do.
func (c *conn) removeLocked(st *stream) bool {
	st.removed = true
	delete(c.streams, st.id)
	if len(c.streams) == 0 && c.idle != nil && !c.goingAway {
		c.idle.Reset(c.srv.IdleTimeout)
	}
	return c.drainedLocked()
}

func (c *conn) drainedLocked() bool {
	return c.goingAway && len(c.streams) == 0 && c.handlers == 0
}

// resetStream ends st abnormally: its request's context is canceled
// with cause, its body and writes fail, and with rst the client gets a
// RST_STREAM with code, unless the stream is closed already (both ends
// sent, or reset before): no frame may follow then.
func (c *conn) resetStream(st *stream, code http2.ErrCode, cause error, rst bool) {
	c.mu.Lock()
	open := !st.removed
	closeConn := false
	if open {
		closeConn = c.removeLocked(st)
	}
	c.mu.Unlock()
	st.resetBody(cause)
	c.wmu.Lock()
	if st.werr == nil {
		st.werr = cause
	}
	if rst && open {
		st.endSent = true
		c.appendRST(st.id, code)
		_ = c.flushLocked(false)
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
	st.cancel(cause)
	if closeConn {
		c.closeSoon()
	}
}

// streamError resets a stream for a client's error in it.
func (c *conn) streamError(se http2.StreamError) {
	c.mu.Lock()
	st := c.streams[se.StreamID]
	if st == nil && se.StreamID > c.maxClientID && se.StreamID%2 == 1 {
		// A stream whose HEADERS were refused still counts as opened.
		c.maxClientID = se.StreamID
	}
	c.mu.Unlock()
	if st != nil {
		c.resetStream(st, se.Code, se, true)
		return
	}
	c.wmu.Lock()
	c.appendRST(se.StreamID, se.Code)
	_ = c.flushLocked(false)
	c.wmu.Unlock()
}

// connError ends the connection for a client's error: a GOAWAY with
// code, then the close once the client had time to read it.
func (c *conn) connError(code http2.ErrCode, err error) {
	c.srv.logf("http2: %s: closing the connection: %v (%v)", c.remoteAddr, err, c.fr.ErrorDetail())
	c.mu.Lock()
	c.goingAway = true
	last := c.maxClientID
	c.mu.Unlock()
	c.wmu.Lock()
	c.appendGoAway(last, code)
	_ = c.flushLocked(true)
	c.wmu.Unlock()
	// Read what the client still sends for a moment, so that closing
	// with unread bytes does not reset the connection before the GOAWAY
	// reaches it; but no more than a well-behaved client has in flight:
	// a flooding one would have us decrypt all it sends for that moment
	// (28 GiB over 30 s of a CONTINUATION flood from 4 connections).
	closeAt := time.Now().Add(closeDelay)
	_ = c.nc.SetReadDeadline(closeAt)
	if n, _ := io.Copy(io.Discard, io.LimitReader(c.nc, maxDrainBytes)); n == maxDrainBytes {
		// And a client still sending is closed on only then, as
		// net/http's server closes it: one that waits for the close to
		// come back is held off that long.
		time.Sleep(time.Until(closeAt))
	}
}

// goAway stops the connection taking new streams; it closes once the
// streams it has are done.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	if c.goingAway {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	last := c.maxClientID
	empty := len(c.streams) == 0 && c.handlers == 0
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.wmu.Lock()
	c.appendGoAway(last, code)
	_ = c.flushLocked(false)
	c.wmu.Unlock()
	if empty {
		c.closeSoon()
	}
}

// closeSoon closes the connection after closeDelay: the client reads
// the GOAWAY, and usually closes first.
func (c *conn) closeSoon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.closing = true
	time.AfterFunc(closeDelay, c.closeNow)
}

// closeNow closes the connection; the serve goroutine then tears it down.
func (c *conn) closeNow() {
	c.closeOnce.Do(func() { close(c.closed) })
	c.closeTransport()
}

// closeTransport closes the connection, ending a stalled write.
func (c *conn) closeTransport() {
	if c.cork != nil {
		c.cork.abortWrite()
	}
	_ = c.nc.Close()
}

// teardown ends everything the connection still has: the streams'
// contexts and bodies, and writers waiting for it.
func (c *conn) teardown() {
	c.cancel()
	c.closeTransport()
	c.mu.Lock()
	c.goingAway = true
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	c.queued = nil
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.wmu.Lock()
	if c.werr == nil {
		c.werr = errConnClosed
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
	for _, st := range streams {
		c.resetStream(st, http2.ErrCodeNo, errConnClosed, false)
	}
	// The connection is done once its handlers are: http.Server.Shutdown,
	// which waits for connections, then waits for them too.
	c.running.Wait()
}

// returnWindow gives n bytes of the connection's receive window back to
// the client, in WINDOW_UPDATEs of at least a quarter of the window.
func (c *conn) returnWindow(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.returned += int32(n)
	var incr int32
	if c.returned >= connWindow/4 {
		incr = c.returned
		c.returned = 0
	}
	c.mu.Unlock()
	if incr > 0 {
		c.sendWindowUpdate(0, uint32(incr))
	}
}

// grant adds to the connection's receive window what a WINDOW_UPDATE
// whose write is beginning gives.
func (c *conn) grant(incr int32) {
	c.mu.Lock()
	c.recvWindow += incr
	c.mu.Unlock()
}

func (c *conn) sendWindowUpdate(id, incr uint32) {
	c.wmu.Lock()
	c.appendWindowUpdate(id, incr)
	_ = c.flushLocked(false)
	c.wmu.Unlock()
}
