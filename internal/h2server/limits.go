package h2server

import (
	"errors"
	"time"

	"golang.org/x/net/http2"
)

// What a client can make a connection hold, and what happens past it.
// Each bound is one a well-behaved client never meets; a client that
// meets one is told (GOAWAY or RST_STREAM with ENHANCE_YOUR_CALM) and
// counted (Server.OnClientError).
//
//   - Control frames the server queues in answer to the client (SETTINGS
//     and PING ACKs, RST_STREAM, WINDOW_UPDATE, GOAWAY) while they cannot
//     be written, because a handler's write to the connection is stalled
//     and the client does not read: at most maxQueuedControlFrames, as
//     net/http's HTTP/2 server (x/net/http2's maxQueuedControlFrames).
//     Past it the connection ends without a GOAWAY (one could not be
//     written either).
//   - Answers waiting for the client's flow-control window: at most
//     Server.MaxWaitingBytes a connection (32 MiB), each counting at
//     least bufSize; a stream whose wait would pass it is reset, and
//     the connection ends once 2 × MaxConcurrentStreams were (a client
//     opening them again would have their handlers start for ever). A
//     wait longer than WriteByteTimeout without window resets the stream
//     too: its client stopped reading it.
//   - Requests waiting for a handler slot (their streams reset by the
//     client while their handlers ran): at most 4 × MaxConcurrentStreams,
//     holding at most maxQueuedHeaderBytes of header fields, else GOAWAY
//     ENHANCE_YOUR_CALM (the "rapid reset" attack).
//   - A header block: MAX_HEADER_LIST_SIZE decoded (431 past it), twice
//     that while its CONTINUATION frames arrive (else GOAWAY). Each 431
//     cost the server decoding all of it (an "HPACK bomb" of 16 KiB
//     decodes to megabytes): past maxRefusedHeaders on a connection, it
//     goes.
//   - Request bodies: the receive windows, 1 MiB a connection. The
//     connection's grows only with the WINDOW_UPDATEs written: a client
//     that stalls our writes cannot make us read more than that.
//
// A client past one of these bounds (kinds KindFlood and KindReset)
// loses its connection, but not at once: nothing more of it is read for
// Server.Hold (defaultHold), and its GOAWAY, when one can be written,
// comes after that.
// Closed at once, a flooding client opens the next connection at once,
// and each costs a TLS handshake and whatever the client asks for before
// it meets a bound again (a large list, to stall our writes): held, a
// flood costs the server about one connection every Hold for each
// the attacker keeps open, and the others' requests do not queue behind
// those bursts. A well-behaved client never meets a bound, so it is never
// held.
//
// So what one connection pins is about MaxWaitingBytes, plus its running
// handlers' own memory, plus maxQueuedHeaderBytes, plus a header block
// and a MiB of bodies: ~52 MiB at the defaults.
const (
	maxQueuedControlFrames = 10000
	// maxQueuedHeaderBytes bounds the header fields of requests waiting
	// for a handler slot.
	maxQueuedHeaderBytes = 16 << 20
	// maxDrainBytes bounds what is read of a connection closed for an
	// error once its GOAWAY is sent: the client's frames in flight.
	maxDrainBytes = 256 << 10
	// maxRefusedHeaders bounds the header blocks a connection may send
	// past MAX_HEADER_LIST_SIZE (each answered 431).
	maxRefusedHeaders = 4
	// defaultHold is how long a connection past a bound is held,
	// unread, before it is closed: long enough that reconnecting
	// attackers cost the server little (measured: 3 s left two attacks'
	// bursts in a well-behaved client's p99), short for a client that
	// went past a bound by a bug.
	defaultHold = 5 * time.Second
)

// The kinds of ClientError.
const (
	// KindFlood: the client made the server queue more than it allows
	// (control frames it does not read, answers waiting for window,
	// header blocks or queued requests past their bounds).
	KindFlood = "flood"
	// KindReset: the client reset streams faster than their handlers
	// end ("rapid reset").
	KindReset = "reset"
	// KindStall: a stream's answer waited for window longer than
	// WriteByteTimeout.
	KindStall = "stall"
	// KindProtocol: the client broke HTTP/2's rules (a connection or
	// stream error).
	KindProtocol = "protocol"
)

// ClientError is an error a client caused that an attack would cause
// too.
type ClientError struct {
	// Kind is one of the Kind constants.
	Kind string
	// Remote is the client's address.
	Remote string
	Err    error
	// First: the first of its connection, the one to log.
	First bool
}

var (
	errControlFlood  = errors.New("h2server: too many control frames queued: the client does not read them")
	errWaitingFlood  = errors.New("h2server: too many bytes of answers wait for the client's flow-control window")
	errQueuedFlood   = errors.New("h2server: too many header bytes of requests wait for a handler")
	errStalled       = errors.New("h2server: the client gave no flow-control window for the write timeout")
	errHeaderFlood   = errors.New("h2server: a header block's CONTINUATION frames go far past the header list's limit")
	errRapidReset    = errors.New("h2server: too many requests wait for a handler: the client resets streams as fast as it opens them")
	errHeaderBombs   = errors.New("h2server: too many header blocks past the header list's limit")
	errWindowOverrun = errors.New("h2server: the client sent more DATA than the connection's flow-control window")
)

// kindError is a client's error (err: the http2.ConnectionError or
// StreamError to answer with) of another kind than KindProtocol, and
// what it did (cause).
type kindError struct {
	kind  string
	cause error
	err   error
}

func (e kindError) Error() string { return e.cause.Error() }
func (e kindError) Unwrap() error { return e.err }

// kindOf is the kind of a client's error.
func kindOf(err error) string {
	var ke kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return KindProtocol
}

// flood is the connection error of a client past a bound.
func flood(cause error) error {
	return kindError{KindFlood, cause, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)}
}

// clientError counts err, of kind, and tells OnClientError of it.
func (c *conn) clientError(kind string, err error) {
	first := c.errored.CompareAndSwap(false, true)
	if first {
		c.srv.logf("http2: %s: %s: %v", c.remoteAddr, kind, err)
	}
	if f := c.srv.OnClientError; f != nil {
		f(ClientError{Kind: kind, Remote: c.remoteAddr, Err: err, First: first})
	}
}

// queuedControl notes a control frame queued, c.wmu held. Past
// maxQueuedControlFrames unwritten the client is not reading what it
// makes us send: the connection is closed, which ends the stalled write
// and, with its next read, the serve goroutine.
func (c *conn) queuedControl() {
	c.outControl++
	if c.outControl+c.writingControl > maxQueuedControlFrames {
		c.floodLocked(errControlFlood)
	}
}

// floodLocked ends the connection of a client past a bound, c.wmu held,
// without a GOAWAY (it could not be written): nothing more is written or
// read, and the connection closes after the hold, which ends a stalled
// write, every writer waiting, and the serve goroutine.
func (c *conn) floodLocked(cause error) {
	if c.werr != nil {
		return
	}
	c.werr = cause
	c.wcond.Broadcast()
	c.clientError(KindFlood, cause)
	c.hold(true)
}

// hold starts the hold of a client past a bound; closeAtEnd closes the
// connection when it ends (for one whose GOAWAY cannot be written).
func (c *conn) hold(closeAtEnd bool) {
	d := c.srv.hold()
	if c.heldUntil.CompareAndSwap(0, time.Now().Add(d).UnixNano()) && closeAtEnd {
		time.AfterFunc(d, c.closeNow)
	}
}

// heldOff waits, in the serve goroutine, until the connection's hold
// ends or the connection is closed (at the hold's end, or by a
// shutdown, which must not wait for it), reading nothing meanwhile; it
// reports whether the connection was held.
func (c *conn) heldOff() bool {
	until := c.heldUntil.Load()
	if until == 0 {
		return false
	}
	t := time.NewTimer(time.Until(time.Unix(0, until)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.closed:
	}
	return true
}

// resetWaiting resets st, whose writer waits with c.wmu held, for a
// client's error of kind.
func (c *conn) resetWaiting(st *stream, code http2.ErrCode, kind string, cause error) error {
	c.wmu.Unlock()
	c.resetStream(st, code, cause, true)
	c.clientError(kind, cause)
	c.wmu.Lock()
	return cause
}

// awaitWindow waits, c.wmu held, until st may send again, or why it
// cannot. What the answer holds meanwhile, left bytes (at least bufSize),
// counts against the connection's MaxWaitingBytes: a stream whose wait
// would pass it is reset at once, and so is one whose client opens no
// window for WriteByteTimeout.
func (c *conn) awaitWindow(st *stream, left int) error {
	held := int64(max(left, bufSize))
	if c.waitingBytes+held > c.srv.maxWaitingBytes() {
		c.waitingResets++
		if c.waitingResets > 2*int(c.maxStreams) {
			// A client that opens streams again as fast as they are
			// reset would have us start their handlers for ever: the
			// connection goes, as a control-frame flood's does.
			c.floodLocked(errWaitingFlood)
			return errWaitingFlood
		}
		return c.resetWaiting(st, http2.ErrCodeEnhanceYourCalm, KindFlood, errWaitingFlood)
	}
	c.waitingBytes += held
	defer func() { c.waitingBytes -= held }()
	closed := func() bool { return st.sendWindow <= 0 || c.sendWindow <= 0 }
	stalled := false
	timer := time.AfterFunc(c.srv.writeByteTimeout(), func() {
		c.wmu.Lock()
		stalled = true
		c.wcond.Broadcast()
		c.wmu.Unlock()
	})
	defer timer.Stop()
	for st.werr == nil && c.werr == nil && closed() && !stalled {
		c.wcond.Wait()
	}
	if err := c.streamWriteErr(st); err != nil {
		return err
	}
	if closed() {
		return c.resetWaiting(st, http2.ErrCodeCancel, KindStall, errStalled)
	}
	return nil
}
