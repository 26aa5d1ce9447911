package h2server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// bufSize is how much of a body a response keeps before writing it: a
// small answer goes out whole, with its headers, when the handler
// returns.
const bufSize = 16 << 10

// responseWriter is a stream's http.ResponseWriter, with the methods
// http.ResponseController looks for (flushing, deadlines, full duplex).
// Like net/http's, it is used by one goroutine at a time. It is a handle
// on the response's state, which is recycled once the handler returned:
// a handler that kept its writer past that gets a nil dereference, as
// with net/http's, rather than writing into another request's response.
type responseWriter struct{ *writerState }

type writerState struct {
	c      *conn
	st     *stream
	header http.Header
	isHead bool

	sentHeader bool  // the HEADERS frame went out
	done       bool  // the handler returned
	closeConn  bool  // the handler set "Connection: close"
	declLen    int64 // the handler's Content-Length, -1 without one
	written    int64
	hdr        headerBlock // the final header, once WriteHeader set its status
	hasType    bool
	encoded    bool // Content-Encoding set: no sniffing
	buf        []byte
	bufp       *[]byte // buf's pooled buffer
	err        error
}

// writerStates recycles response states and their field slices (as
// net/http's HTTP/2 server recycles its response state). Header maps are
// not: a handler may have kept its own past its return.
var writerStates = sync.Pool{New: func() any { return new(writerState) }}

func newResponseWriter(c *conn, st *stream, req *http.Request) *responseWriter {
	rw := writerStates.Get().(*writerState)
	fields := rw.hdr.fields
	*rw = writerState{c: c, st: st, header: make(http.Header, 8), declLen: -1, isHead: req.Method == http.MethodHead}
	rw.hdr.fields = fields[:0]
	return &responseWriter{rw}
}

// release recycles the state of rw's complete response; rw is unusable
// from then on.
func (rw *responseWriter) release() {
	s := rw.writerState
	rw.writerState = nil
	if cap(s.hdr.fields) > 64 {
		return // an unusual answer's: let it go
	}
	fields := s.hdr.fields
	clear(fields[:cap(fields)])
	*s = writerState{}
	s.hdr.fields = fields[:0]
	writerStates.Put(s)
}

func (rw *writerState) Header() http.Header { return rw.header }

// wroteHeader reports whether WriteHeader was called with a final status.
func (rw *writerState) wroteHeader() bool { return rw.hdr.status != 0 }

func (rw *writerState) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if rw.done || rw.wroteHeader() {
		return
	}
	if code < 200 {
		// Informational: sent at once, the final status still to come
		// (101 too: HTTP/2 has no protocol switch to make final).
		h := headerBlock{status: code}
		rw.snapshot(&h, false)
		if err := rw.c.writeStream(rw.st, &h, false); err != nil {
			rw.err = err
		}
		return
	}
	// A Content-Length the handler set is sent when it is a length, and
	// dropped (the length computed instead) when not.
	if _, ok := rw.header["Content-Length"]; ok {
		if v, err := strconv.ParseUint(rw.header.Get("Content-Length"), 10, 63); err == nil {
			rw.declLen = int64(v)
		} else {
			delete(rw.header, "Content-Length")
		}
	}
	// The header map as it is now is the response's: later changes to
	// it have no effect, as with net/http.
	rw.hdr.status = code
	rw.snapshot(&rw.hdr, true)
}

// snapshot appends the header map's fields to h, as HTTP/2 carries them:
// names in lower case, no connection-specific fields, nothing invalid.
// Only a final header (not a 1xx's) tells what the body is and gets a
// Date, as with net/http.
func (rw *writerState) snapshot(h *headerBlock, final bool) {
	if cap(h.fields) == 0 {
		h.fields = make([]hpack.HeaderField, 0, len(rw.header)+3)
	}
	for k, vv := range rw.header {
		name, ok := lowerHeader(k)
		if !ok {
			continue
		}
		switch name {
		case "connection":
			if final && len(vv) > 0 && strings.EqualFold(vv[0], "close") {
				rw.closeConn = true
			}
			continue
		case "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			continue
		case "content-type":
			rw.hasType = rw.hasType || final
		case "content-length":
			if !final {
				continue
			}
		case "content-encoding":
			rw.encoded = rw.encoded || final
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				continue
			}
			// An audit ID is new on every response: never indexed, it
			// keeps HPACK's table for the fields that repeat.
			h.fields = append(h.fields, hpack.HeaderField{Name: name, Value: v, Sensitive: name == "audit-id"})
		}
	}
	if _, ok := rw.header["Date"]; !ok && final {
		h.fields = append(h.fields, hpack.HeaderField{Name: "date", Value: httpDate()})
	}
}

func (rw *writerState) Write(p []byte) (int, error) {
	if rw.done {
		return 0, errStreamDone
	}
	if !rw.wroteHeader() {
		rw.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(rw.hdr.status) {
		return 0, http.ErrBodyNotAllowed
	}
	rw.written += int64(len(p))
	if rw.declLen >= 0 && rw.written > rw.declLen {
		return 0, http.ErrContentLength
	}
	if rw.err != nil {
		return 0, rw.err
	}
	// A response to HEAD buffers its body too: the Content-Length and
	// Content-Type sent are those of the body a GET would get.
	if len(rw.buf)+len(p) <= bufSize {
		if rw.bufp == nil {
			rw.bufp = getBuffer(&bodyBuffers)
			rw.buf = (*rw.bufp)[:0]
		}
		rw.buf = append(rw.buf, p...)
		return len(p), nil
	}
	if err := rw.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush implements http.Flusher.
func (rw *writerState) Flush() { _ = rw.FlushError() }

// FlushError sends the header and what the body buffered.
func (rw *writerState) FlushError() error {
	if rw.done {
		return errStreamDone
	}
	if !rw.wroteHeader() {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.err != nil {
		return rw.err
	}
	if rw.sentHeader && len(rw.buf) == 0 {
		return nil
	}
	return rw.send(nil, false)
}

// SetReadDeadline bounds reads of the request body.
func (rw *writerState) SetReadDeadline(t time.Time) error {
	rw.st.setReadDeadline(t)
	return nil
}

// SetWriteDeadline resets the stream when t passes (net/http's HTTP/2
// server does the same).
func (rw *writerState) SetWriteDeadline(t time.Time) error {
	rw.st.setWriteDeadline(t)
	return nil
}

// EnableFullDuplex: HTTP/2 is.
func (rw *writerState) EnableFullDuplex() error { return nil }

// finish completes the response once the handler returned.
func (rw *writerState) finish() {
	if rw.done {
		return
	}
	if !rw.wroteHeader() {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.err == nil {
		_ = rw.send(nil, true)
	}
	rw.done = true
	if rw.bufp != nil {
		putBuffer(&bodyBuffers, rw.bufp, rw.buf, bufSize)
		rw.buf, rw.bufp = nil, nil
	}
	if rw.closeConn {
		rw.c.goAway(http2.ErrCodeNo)
	}
}

// send writes the header if it was not yet, the buffered body and more,
// ending the stream with end.
func (rw *writerState) send(more []byte, end bool) error {
	var h *headerBlock
	if !rw.sentHeader {
		rw.sentHeader = true
		rw.completeHeader(end, more)
		h = &rw.hdr
	}
	if rw.isHead {
		rw.buf, more = rw.buf[:0], nil
	}
	// What was buffered and more go out together.
	err := rw.c.writeStream(rw.st, h, end, rw.buf, more)
	rw.buf = rw.buf[:0]
	if err != nil {
		rw.err = err
		return err
	}
	if end {
		rw.c.localEnded(rw.st)
	}
	return nil
}

// completeHeader adds what net/http adds to a response's header: the
// length of a body written whole when the handler returned, and a
// Content-Type sniffed from the first bytes when the handler set none.
func (rw *writerState) completeHeader(final bool, more []byte) {
	if !bodyAllowed(rw.hdr.status) {
		return
	}
	if final && rw.declLen < 0 && (len(rw.buf) > 0 || !rw.isHead) {
		rw.hdr.fields = append(rw.hdr.fields, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(rw.buf))})
	}
	if !rw.hasType && !rw.encoded {
		first := rw.buf
		if len(first) == 0 {
			first = more
		}
		if len(first) > 0 {
			rw.hdr.fields = append(rw.hdr.fields, hpack.HeaderField{Name: "content-type", Value: http.DetectContentType(first)})
		}
	}
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// commonLower are the header names responses usually carry, in their
// HTTP/2 form, so that they need no lowering.
var commonLower = map[string]string{
	"Audit-Id":               "audit-id",
	"Cache-Control":          "cache-control",
	"Content-Encoding":       "content-encoding",
	"Content-Length":         "content-length",
	"Content-Type":           "content-type",
	"Date":                   "date",
	"Retry-After":            "retry-after",
	"Vary":                   "vary",
	"Warning":                "warning",
	"Www-Authenticate":       "www-authenticate",
	"X-Content-Type-Options": "x-content-type-options",
	"Location":               "location",
	"Last-Modified":          "last-modified",
	"Etag":                   "etag",
}

// lowerHeader is k in lower case, and whether it is a valid field name.
func lowerHeader(k string) (string, bool) {
	if v, ok := commonLower[k]; ok {
		return v, true
	}
	if !httpguts.ValidHeaderFieldName(k) {
		return "", false
	}
	return strings.ToLower(k), true
}

// httpDate is the Date header's value, formatted once a second.
func httpDate() string {
	now := time.Now().Unix()
	if d := cachedDate.Load(); d != nil && d.unix == now {
		return d.text
	}
	d := &dateText{unix: now, text: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return d.text
}

type dateText struct {
	unix int64
	text string
}

var cachedDate atomic.Pointer[dateText]
