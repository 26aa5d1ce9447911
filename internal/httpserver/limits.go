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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/leasehold/leasehold/internal/auth"
)

// Defaults of the in-flight limits (kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight).
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
)

// tooManyRequestsMessage is kube-apiserver's plain-text 429 body
// (apiserver/pkg/server/filters/maxinflight.go).
const tooManyRequestsMessage = "Too many requests, please try again later."

// maxSelectorRequirements bounds the requirements of one label or field
// selector. kube-apiserver has no such limit (only the 1 MiB header
// limit), but a list costs requirements × objects to filter, without
// looking at its deadline: a 1 MiB selector of "!k" terms takes minutes of
// CPU over 20,000 leases. Real selectors have a handful of requirements;
// "in (...)" value lists are sets and do not count against this.
const maxSelectorRequirements = 256

// writeGrace is how long past its deadline a timed-out request may still
// read and write: long enough to send the 504 or finish an answer begun,
// short enough that a client that does not send or read cannot hold the
// handler.
const writeGrace = 5 * time.Second

// inflight limits the requests served at once, as kube-apiserver's
// WithMaxInFlightLimit does: one budget for reads (get, list), one for
// everything else; long-running requests (watches, profiles) do not count;
// a request over budget is refused with 429, unless its user is in
// system:masters. It also limits the watches per user when watchesPerUser
// is positive (kube-apiserver has no such limit).
type inflight struct {
	// readOnly and mutating hold one token per request being served;
	// nil means no limit. A full channel refuses the request: they are
	// never waited on.
	readOnly, mutating chan struct{}
	// releaseReadOnly and releaseMutating give a slot back, made once:
	// a closure per request was an allocation.
	releaseReadOnly, releaseMutating func()
	watchesPerUser                   int

	mu sync.Mutex // guards watches
	// watches counts the open watches per user name.
	watches map[string]int
}

func newInflight(readOnly, mutating, watchesPerUser int) *inflight {
	l := &inflight{watchesPerUser: watchesPerUser, watches: map[string]int{}}
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
		l.releaseReadOnly = func() { <-l.readOnly }
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
		l.releaseMutating = func() { <-l.mutating }
	}
	return l
}

// admit takes a slot for the request; ok false means it is refused.
// release frees the slot; it must be called once the request ends.
func (l *inflight) admit(a auth.Attributes) (release func(), ok bool) {
	privileged := a.User.InGroup(auth.SystemPrivilegedGroup)
	if longRunning(a) {
		if a.Verb != "watch" || l.watchesPerUser <= 0 || privileged {
			return func() {}, true
		}
		return l.admitWatch(a.User.Name)
	}
	c, release := l.readOnly, l.releaseReadOnly
	if mutating(a) {
		c, release = l.mutating, l.releaseMutating
	}
	if c == nil {
		return func() {}, true
	}
	select {
	case c <- struct{}{}:
		return release, true
	default:
		// A system:master always gets an answer (kube-apiserver: "a
		// super-admin or a loopback connection").
		return func() {}, privileged
	}
}

func (l *inflight) admitWatch(user string) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watches[user] >= l.watchesPerUser {
		return nil, false
	}
	l.watches[user]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.watches[user]--; l.watches[user] <= 0 {
			delete(l.watches, user)
		}
	}, true
}

// tooManyRequests is kube-apiserver's 429: plain text and Retry-After, not
// a Status.
func tooManyRequests(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, tooManyRequestsMessage, http.StatusTooManyRequests)
}

// checkSelectors refuses, with 400, selectors of more than
// maxSelectorRequirements requirements. Selectors that do not parse are
// left to the handler, which words the error as kube-apiserver does.
func checkSelectors(r *request) error {
	if a := r.attrs; !a.ResourceRequest || a.Verb != "list" && a.Verb != "watch" && a.Verb != "deletecollection" {
		return nil
	}
	q := r.query
	n := 0
	if v := q.Get("labelSelector"); v != "" {
		if sel, err := labels.Parse(v); err == nil {
			reqs, _ := sel.Requirements()
			n = len(reqs)
		}
		if n > maxSelectorRequirements {
			return apierrors.NewBadRequest(fmt.Sprintf("labelSelector has %d requirements; at most %d are allowed", n, maxSelectorRequirements))
		}
	}
	if v := q.Get("fieldSelector"); v != "" {
		n = 0
		if sel, err := fields.ParseSelector(v); err == nil {
			n = len(sel.Requirements())
		}
		if n > maxSelectorRequirements {
			return apierrors.NewBadRequest(fmt.Sprintf("fieldSelector has %d requirements; at most %d are allowed", n, maxSelectorRequirements))
		}
	}
	return nil
}

// requestTimeout is the deadline of a non-long-running request, as
// kube-apiserver's WithRequestDeadline and handlers set it: the request
// timeout (60 s), 34 s for writes to resources, or less when the client
// asks with the timeout parameter. A timeout that does not parse is a 400.
func (s *Server) requestTimeout(r *request) (time.Duration, error) {
	limit := s.cfg.RequestTimeout
	if r.attrs.ResourceRequest && mutating(r.attrs) && s.cfg.WriteTimeout < limit {
		limit = s.cfg.WriteTimeout
	}
	v := r.query.Get("timeout")
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
func timeoutError(a auth.Attributes) error {
	if a.ResourceRequest && mutating(a) {
		return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
	return apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
}

// withTimeout serves a non-long-running request with a deadline, as
// kube-apiserver's timeout filter does: next runs in its own goroutine,
// and when the deadline passes first the client gets a 504 Status while
// next finishes in the background with its context cancelled, its later
// writes discarded. When next has begun its answer by then (often its own
// 504), it gets the write grace to finish it; past that the connection
// breaks (an HTTP/2 stream is reset). So a client sending its body
// slowly, or not reading the answer, cannot hold a handler (and its
// in-flight slot) beyond the deadline and the grace: on HTTP/1 through
// the connection's read and write deadlines, on HTTP/2 through the
// stream's reset.
//
// A panic in next is logged and answered 500 when nothing was written yet.
func (s *Server) withTimeout(w http.ResponseWriter, req *http.Request, r *request, next func(http.ResponseWriter, *http.Request)) {
	timeout, err := s.requestTimeout(r)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if fin := finisherOf(w); fin != nil {
		s.timeoutInline(w, req, r, time.Now().Add(timeout), fin, next)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	rc := http.NewResponseController(w)
	http1 := req.ProtoMajor < 2
	if http1 {
		// The connection's deadlines are the request's plus the grace: a
		// handler that ends by then leaves an HTTP/1 connection reusable
		// (net/http takes a read timeout while it waits for the next
		// request as the end of the connection). An HTTP/2 stream gets
		// its deadline only once the request times out (below): until
		// then nothing needs it, and each deadline costs a round trip to
		// the connection's goroutine (2.4% of a renewal's CPU profile).
		deadline, _ := ctx.Deadline()
		_ = rc.SetReadDeadline(deadline.Add(writeGrace))
		_ = rc.SetWriteDeadline(deadline.Add(writeGrace))
		// HTTP/1 keeps a write deadline for the connection's next request.
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}

	tw := &timeoutWriter{w: w, header: w.Header().Clone()}
	// The handler gets its own copy of the request, as it may outlive this
	// call; a shallow one: what changes headers copies them first
	// (authentication removing a token).
	inner := req.WithContext(ctx)
	done := make(chan any, 1) // the handler's panic, or nil; never blocks
	s.handlers.Add(1)
	s.workers.Run(func() {
		defer s.handlers.Done()
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler { //nolint:errorlint // sentinel panic value, as net/http compares it
				s.logPanic(req, p)
			}
			done <- p
		}()
		next(tw, inner)
	})
	select {
	case p := <-done:
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler || !tw.claim() { //nolint:errorlint // sentinel panic value
			panic(http.ErrAbortHandler)
		}
		s.writeError(w, req, panicError())
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			// The client went away: nobody reads an answer.
			tw.claim()
			return
		}
		if !http1 {
			// Whoever writes from now on (the 504 below, or the handler
			// finishing its answer) has the grace to do it; past it the
			// stream is reset, which also ends a handler blocked reading
			// the body.
			_ = rc.SetWriteDeadline(time.Now().Add(writeGrace))
		}
		if tw.claimUnstarted() {
			s.writeError(w, req, timeoutError(r.attrs))
			return
		}
		// The answer has begun, often the handler's own 504: let it
		// finish within the write grace. Past it, only breaking the
		// connection (or resetting the HTTP/2 stream) tells the client.
		grace := time.NewTimer(writeGrace)
		defer grace.Stop()
		select {
		case p := <-done:
			if p != nil {
				panic(http.ErrAbortHandler)
			}
		case <-grace.C:
			tw.claim()
			panic(http.ErrAbortHandler)
		}
	}
}

// finisher is a ResponseWriter that can complete its response while its
// handler still runs (h2server's).
type finisher interface {
	FinishResponse() error
	// ReplaceHeader gives the response a new header map before it is
	// written.
	ReplaceHeader(http.Header)
	// CancelRequest ends the request's context with cause.
	CancelRequest(cause error)
}

// finisherOf is w's finisher, through the writers wrapping it.
func finisherOf(w http.ResponseWriter) finisher {
	for {
		if f, ok := w.(finisher); ok {
			return f
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// timeoutInline is withTimeout on a connection that can answer a
// request while its handler runs: next runs here, not on a goroutine
// of its own (a hand-off each way, a few percent of a small request's
// CPU), and the deadline is watched by a timer instead. When it passes
// first the client gets its 504 and the stream ends at once, or, with an
// answer begun, the write grace to finish it, after which the stream is
// reset; next goes on with its context cancelled, its writes discarded,
// as on the other path.
//
// The handler writes w's own header map: the 504 goes out with a new
// one (ReplaceHeader), so no request pays for a copy. The timer also
// ends the request's context, the stream's (CancelRequest), with the
// cause context.DeadlineExceeded, so the request has no context and
// timer of its own; the context serveAuthenticated makes tells the
// deadline (r.deadline) and the error. The timer is not
// context.AfterFunc, which would also run when the client goes away:
// the stream is reset then, and what the handler writes goes nowhere.
func (s *Server) timeoutInline(w http.ResponseWriter, req *http.Request, r *request, deadline time.Time, fin finisher, next func(http.ResponseWriter, *http.Request)) {
	t := &inlineTimeout{timeoutWriter: timeoutWriter{w: w, header: w.Header(), headerIsW: true}}
	r.deadline = deadline
	ctx := req.Context() // the stream's
	t.fired.Add(1)
	timer := time.AfterFunc(time.Until(deadline), func() {
		defer t.fired.Done()
		if ctx.Err() != nil {
			// The client went away: nobody reads an answer.
			t.claim()
			return
		}
		fin.CancelRequest(context.DeadlineExceeded)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeGrace))
		if t.claimUnstarted() {
			h := make(http.Header, 4)
			setBaseHeader(h, r.auditID[:])
			fin.ReplaceHeader(h)
			s.writeError(w, req, timeoutError(r.attrs))
			_ = fin.FinishResponse()
			t.answered = true
		}
	})
	s.handlers.Add(1)
	defer s.handlers.Done()
	defer func() {
		// Past this point w is the caller's again: the timer must be
		// done with it.
		timedOut := !timer.Stop()
		if timedOut {
			t.fired.Wait()
		}
		p := recover()
		if p == nil {
			return
		}
		if p != http.ErrAbortHandler { //nolint:errorlint // sentinel panic value, as net/http compares it
			s.logPanic(req, p)
		}
		if t.answered {
			return
		}
		if timedOut || p == http.ErrAbortHandler || !t.claim() { //nolint:errorlint // sentinel panic value
			panic(http.ErrAbortHandler)
		}
		s.writeError(w, req, panicError())
	}()
	next(&t.timeoutWriter, req)
}

// inlineTimeout is timeoutInline's state, shared with its timer.
type inlineTimeout struct {
	timeoutWriter
	fired    sync.WaitGroup // done once the timer's function returned
	answered bool           // by the timer, with the 504
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

// recoverLongRunning recovers a panic of a long-running request served in
// the connection's goroutine: it is logged, and the connection is broken
// (the answer has usually begun).
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

// Wait waits for handlers that outlived their request's deadline to
// finish. Call it after the HTTP server has shut down, before closing the
// store.
func (s *Server) Wait() { s.handlers.Wait() }

// timeoutWriter is the ResponseWriter of a request served by withTimeout.
// It has no Unwrap, on purpose: every write must go through its lock, so
// Flush is implemented here instead.
type timeoutWriter struct {
	w http.ResponseWriter

	// mu guards the fields below, and is held while writing to w, so that
	// the handler and the timeout never write at once.
	mu sync.Mutex
	// header collects the handler's headers until its first write,
	// unless headerIsW: then it is w's own map.
	header    http.Header
	headerIsW bool
	// wroteHeader: the handler has started its answer.
	wroteHeader bool
	// claimed: the timeout (or panic) path owns w; the handler's writes
	// are discarded.
	claimed bool
}

// claim hands w to the caller: it reports whether nothing has been
// written yet, and discards the handler's writes from now on.
func (tw *timeoutWriter) claim() bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.claimed = true
	return !tw.wroteHeader
}

// claimUnstarted claims w only if the handler has written nothing yet.
func (tw *timeoutWriter) claimUnstarted() bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.wroteHeader {
		return false
	}
	tw.claimed = true
	return true
}

func (tw *timeoutWriter) Header() http.Header {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.claimed {
		return http.Header{}
	}
	return tw.header
}

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.claimed || tw.wroteHeader {
		return
	}
	tw.start()
	tw.w.WriteHeader(code)
}

func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.claimed {
		return 0, http.ErrHandlerTimeout
	}
	if !tw.wroteHeader {
		tw.start()
	}
	return tw.w.Write(p)
}

// FlushError flushes what the handler wrote, for http.ResponseController.
func (tw *timeoutWriter) FlushError() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.claimed {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(tw.w).Flush()
}

// Flush implements http.Flusher.
func (tw *timeoutWriter) Flush() { _ = tw.FlushError() }

// start copies the handler's headers to w; mu must be held.
func (tw *timeoutWriter) start() {
	tw.wroteHeader = true
	if tw.headerIsW {
		return
	}
	h := tw.w.Header()
	for k := range h {
		delete(h, k)
	}
	for k, v := range tw.header {
		h[k] = v
	}
}
