package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/internal/auth"
)

// A request's deadlines, all set here. The connections' own (the idle
// timeout, the header timeout, the stall timeout of a write that makes no
// progress) are the transport's (internal/transport). Both reach the
// connection only through http.ResponseController, so that they hold
// alike on HTTP/1.1, on leasehold's HTTP/2 server and on net/http's:
//
//   - A request that is not long-running has a deadline (requestTimeout).
//     Its context ends then, and every step that waits (the store, the
//     watch cache) returns the context's error, answered 504 in
//     kube-apiserver's words (timeoutError).
//   - Its body's reads end at the deadline (HTTP/1.1: plus writeGrace),
//     and its answer's writes at the deadline plus writeGrace: a client
//     that sends or reads too slowly cannot hold a handler, and a handler
//     deaf to its context is cut off (an HTTP/2 stream is reset; an
//     HTTP/1.1 connection's writes fail, and it ends with the handler).
//   - A long-running request (a watch, a profile) has no deadline; each of
//     its writes must make progress within the stall timeout (stallGuard).

// writeGrace is how long past its deadline a request may still write:
// long enough to send the 504 or finish an answer begun, short enough
// that a client that does not read cannot hold the handler.
const writeGrace = 5 * time.Second

// requestTimeout is the deadline of a non-long-running request, as
// kube-apiserver's WithRequestDeadline and handlers set it: the request
// timeout (60 s), 34 s for writes to resources, or less when the client
// asks with the timeout parameter. A timeout that does not parse is a 400.
func (s *Server) requestTimeout(call *request) (time.Duration, error) {
	limit := s.cfg.RequestTimeout
	if call.attrs.ResourceRequest && mutating(call.attrs) && s.cfg.WriteTimeout < limit {
		limit = s.cfg.WriteTimeout
	}
	v := call.query.Get("timeout")
	if v == "" {
		return limit, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL - %v", err))
	}
	if d > 0 && d < limit {
		return d, nil
	}
	return limit, nil
}

// timeoutError is the 504 of a request past its deadline: a write's
// wording is that of kube-apiserver's handlers (the finisher), the others'
// that of its timeout filter.
func timeoutError(a auth.Attributes) *apierrors.StatusError {
	if a.ResourceRequest && mutating(a) {
		return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
	return apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
}

// withDeadline serves a request that is not long-running with its
// deadline (above): call.ctx ends at it, and the connection's read and write
// deadlines are set from it. A panic in next is logged and answered 500
// when nothing was written yet; otherwise the connection breaks.
func (s *Server) withDeadline(w http.ResponseWriter, req *http.Request, call *request, next func(http.ResponseWriter, *http.Request, *request)) {
	timeout, err := s.requestTimeout(call)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	defer cancel()
	call.ctx = ctx
	rc := http.NewResponseController(w)
	if req.ProtoMajor < 2 {
		// net/http reads an HTTP/1.1 connection while its handler runs,
		// to see the client go: at its read deadline it would take the
		// client for gone and end the request's context (Canceled)
		// just as it ends at the deadline. So a body sent too slowly
		// over HTTP/1.1 meets its 504 only after the grace.
		_ = rc.SetReadDeadline(deadline.Add(writeGrace))
		// The connection keeps its write deadline for the next request
		// (net/http resets only the read deadline).
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	} else {
		_ = rc.SetReadDeadline(deadline)
	}
	_ = rc.SetWriteDeadline(deadline.Add(writeGrace))
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p != http.ErrAbortHandler { //nolint:errorlint // sentinel panic value, as net/http compares it
			s.logPanic(req, p)
		}
		if p == http.ErrAbortHandler || call.answer.code != 0 { //nolint:errorlint // sentinel panic value
			panic(http.ErrAbortHandler)
		}
		s.writeError(w, req, panicError())
	}()
	next(w, req, call)
}

// panicError is the 500 of a request whose handler panicked.
func panicError() error {
	return apierrors.NewInternalError(errors.New("this request caused the server to panic; see the server log for details"))
}

func (s *Server) logPanic(req *http.Request, p any) {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	s.log.Error("panic serving request", "method", req.Method, "uri", req.URL.RequestURI(), "panic", fmt.Sprint(p), "stack", string(buf))
}

// recoverLongRunning recovers a panic of a long-running request: it is
// logged, and the connection is broken (the answer has usually begun).
func (s *Server) recoverLongRunning(req *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p != http.ErrAbortHandler { //nolint:errorlint // sentinel panic value
		s.logPanic(req, p)
	}
	panic(http.ErrAbortHandler)
}

// stallGuard ends a long-running answer whose write makes no progress
// for timeout (a client that stopped reading): it moves the connection's
// write deadline to now while such a write waits, which fails it (an
// HTTP/2 stream is reset; an HTTP/1.1 connection's writes fail). Between
// writes no deadline is set, so a quiet watch lives on.
type stallGuard struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	timer   *time.Timer

	mu sync.Mutex // guards done
	// done: the handler is returning, and its writer must not be used.
	done bool
}

// send writes frames and flushes them, under the guard.
func (g *stallGuard) send(frames ...[]byte) error {
	if g.timer == nil {
		g.timer = time.AfterFunc(g.timeout, g.expire)
	} else {
		g.timer.Reset(g.timeout)
	}
	defer g.timer.Stop()
	for _, f := range frames {
		if _, err := g.w.Write(f); err != nil {
			return err
		}
	}
	if err := g.rc.Flush(); err != nil {
		return fmt.Errorf("flushing watch: %w", err)
	}
	return nil
}

func (g *stallGuard) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done {
		_ = g.rc.SetWriteDeadline(time.Now())
	}
}

// close ends the guard before its handler returns.
func (g *stallGuard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	if g.timer != nil {
		g.timer.Stop()
	}
}
