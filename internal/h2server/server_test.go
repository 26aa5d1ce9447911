package h2server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// start serves h over TLS with this package's HTTP/2 server on a
// Listener, configured by configure when set.
func start(t *testing.T, h http.Handler, configure func(*Server)) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	s := &Server{ErrorLog: log.New(testWriter{t}, "", 0)}
	if configure != nil {
		configure(s)
	}
	Configure(ts.Config, s)
	ts.Listener = Listener(ts.Listener) // as transport.Serve serves
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// client is an HTTP/2 client of ts with the given receive windows (0:
// net/http's).
func client(ts *httptest.Server, streamWindow, connWindow int) *http.Client {
	c := ts.Client()
	tr := c.Transport.(*http.Transport)
	tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: streamWindow, MaxReceiveBufferPerConnection: connWindow}
	return c
}

func TestRoundTrips(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.TLS == nil || r.RemoteAddr == "" || r.Host == "" {
			http.Error(w, fmt.Sprintf("request: proto %d, TLS %v, remote %q, host %q", r.ProtoMajor, r.TLS != nil, r.RemoteAddr, r.Host), http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
			http.Error(w, fmt.Sprintf("ContentLength %d, body %d", r.ContentLength, len(body)), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Query", r.URL.Query().Get("q"))
		_, _ = w.Write(body)
	})
	ts := start(t, echo, nil)
	for _, windows := range []struct{ stream, conn int }{{0, 0}, {65535, 65535}} {
		c := client(ts, windows.stream, windows.conn)
		for _, size := range []int{0, 1, 100, 16 << 10, 16<<10 + 1, 100 << 10, 1<<20 + 3, 3 << 20} {
			t.Run(fmt.Sprintf("window=%d/size=%d", windows.stream, size), func(t *testing.T) {
				want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				req, _ := http.NewRequest(http.MethodPut, ts.URL+"/echo?q=a%20b", bytes.NewReader(want))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				got, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
					t.Fatalf("%s %d: %s", resp.Proto, resp.StatusCode, got)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("got %d bytes back, sent %d", len(got), len(want))
				}
				if q := resp.Header.Get("X-Query"); q != "a b" {
					t.Errorf("X-Query %q", q)
				}
			})
		}
	}
}

// TestConcurrentStreams runs many requests at once on one connection,
// with small windows, so that writers wait for each other and for the
// client's window updates.
func TestConcurrentStreams(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(r.URL.Query().Get("n"))
		for range n {
			_, _ = w.Write(bytes.Repeat([]byte(r.URL.Path[1:]), 1000))
			w.(http.Flusher).Flush()
		}
	}), nil)
	c := client(ts, 20000, 65535)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			letter := string(rune('a' + i%26))
			resp, err := c.Get(ts.URL + "/" + letter + "?n=" + strings.Repeat("x", i%20+1))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				errs <- err
				return
			}
			if want := strings.Repeat(letter, 1000*(i%20+1)); string(body) != want {
				errs <- fmt.Errorf("request %d: %d bytes, want %d", i, len(body), len(want))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestResponseHeaders(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Transfer-Encoding", "chunked") // connection-specific: dropped
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Bad-Value", "a\x00b")
		switch r.URL.Path {
		case "/html":
			_, _ = io.WriteString(w, "<html><body>hi</body></html>")
		case "/declared":
			h.Set("Content-Type", "text/plain")
			h.Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic(fmt.Sprintf("write to a 204: %v", err))
			}
		case "/toolong":
			h.Set("Content-Length", "2")
			if _, err := io.WriteString(w, "abc"); !errors.Is(err, http.ErrContentLength) {
				panic(fmt.Sprintf("write past Content-Length: %v", err))
			}
		case "/late":
			w.WriteHeader(http.StatusAccepted)
			h.Set("X-Late", "1") // after WriteHeader: not sent
			_, _ = io.WriteString(w, "ok")
		case "/early":
			h.Set("Link", "</a>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Link")
			w.WriteHeader(http.StatusCreated)
		case "/mixed":
			// Small writes buffered, then one past the buffer: both go
			// out in order, the buffered part first.
			h.Set("Content-Type", "text/plain")
			for i := range 3 {
				fmt.Fprintf(w, "%d", i)
			}
			_, _ = w.Write(bytes.Repeat([]byte("x"), bufSize+10))
			_, _ = io.WriteString(w, "end")
		case "/badlength":
			h["Content-Length"] = []string{""}
			_, _ = io.WriteString(w, "abc")
		case "/early-typed":
			// What a 1xx carried says nothing of the final response.
			h.Set("Content-Type", "text/plain")
			h.Set("Content-Length", "99")
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Content-Type")
			h.Del("Content-Length")
			_, _ = io.WriteString(w, "<html><body>hi</body></html>")
		}
	}), nil)
	c := ts.Client()
	for _, tc := range []struct {
		method, path string
		status       int
		header       map[string]string
		body         string
	}{
		{"GET", "/html", 200, map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Length": "28", "Transfer-Encoding": "", "Keep-Alive": "", "Bad-Value": ""}, "<html><body>hi</body></html>"},
		{"HEAD", "/html", 200, map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Length": "28"}, ""},
		{"GET", "/declared", 200, map[string]string{"Content-Type": "text/plain", "Content-Length": "5"}, "hello"},
		{"GET", "/nocontent", 204, map[string]string{"Content-Length": "", "Content-Type": ""}, ""},
		{"GET", "/toolong", 200, map[string]string{"Content-Length": "2"}, ""},
		{"GET", "/late", 202, map[string]string{"X-Late": "", "Content-Length": "2"}, "ok"},
		{"GET", "/early", 201, map[string]string{"Link": "", "Content-Length": "0"}, ""},
		{"GET", "/mixed", 200, map[string]string{"Content-Length": ""}, "012" + strings.Repeat("x", bufSize+10) + "end"},
		{"GET", "/badlength", 200, map[string]string{"Content-Length": "3"}, "abc"},
		{"GET", "/early-typed", 200, map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Length": "28"}, "<html><body>hi</body></html>"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(body) != tc.body {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date")
			}
			for k, v := range tc.header {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestFlush: what a handler flushes reaches the client while the
// handler still runs (watches depend on it).
func TestFlush(t *testing.T) {
	next := make(chan struct{})
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := range 3 {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "event %d\n", i)
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
		}
	}), nil)
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 100)
	for i := range 3 {
		next <- struct{}{}
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf[:n]), fmt.Sprintf("event %d\n", i); got != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the events: %q, %v", rest, err)
	}
}

// TestClientGone: a request's context ends when its client resets the
// stream or the connection goes, with the handler still running.
func TestClientGone(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
		ended <- context.Cause(r.Context())
	}), nil)
	c := ts.Client()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	resp.Body.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, errStreamReset) {
			t.Errorf("cause %v, want the stream's reset", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end with the client's reset")
	}

	resp, err = c.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	c.CloseIdleConnections()
	ts.CloseClientConnections()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end with the connection")
	}
}

// TestPanic: a panicking handler resets its stream (INTERNAL_ERROR), and
// the connection serves on.
func TestPanic(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "fine")
	}), func(s *Server) { s.ErrorLog = log.New(lockedWriter{&mu, &logs}, "", 0) })
	c := ts.Client()
	for _, path := range []string{"/panic", "/abort"} {
		resp, err := c.Get(ts.URL + path)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		var se http2.StreamError
		if !errors.As(err, &se) && !strings.Contains(fmt.Sprint(err), "INTERNAL_ERROR") {
			t.Errorf("GET %s: %v, want a stream reset", path, err)
		}
	}
	resp, err := c.Get(ts.URL + "/fine")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "fine" {
		t.Errorf("after the panics: %q", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "panic serving"); n != 1 {
		t.Errorf("%d panics logged, want 1 (ErrAbortHandler is not logged):\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWriteDeadline: a stream whose write deadline passes is reset, and
// its handler's writes fail, even when blocked on flow control.
func TestWriteDeadline(t *testing.T) {
	result := make(chan error, 1)
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		chunk := make([]byte, 16<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				result <- err
				return
			}
			if err := rc.Flush(); err != nil {
				result <- err
				return
			}
		}
	}), nil)
	// The client reads nothing: its 64 KiB window fills.
	resp, err := client(ts, 65535, 65535).Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case err := <-result:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("write error %v, want the deadline's", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write deadline did not end the handler's writes")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the client read a whole body from a reset stream")
	}
}

// TestReadDeadline: body reads fail once the read deadline passes.
func TestReadDeadline(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		fmt.Fprint(w, err)
	}), nil)
	pr, pw := io.Pipe()
	defer pw.Close()
	resp, err := ts.Client().Post(ts.URL, "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "timeout") {
		t.Errorf("the handler's read ended with %q", body)
	}
}

// TestSlowReader: a client that stops reading the connection has it
// closed after WriteByteTimeout, and its handlers' writes fail.
func TestSlowReader(t *testing.T) {
	result := make(chan error, 1)
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				result <- err
				return
			}
		}
	}), func(s *Server) { s.WriteByteTimeout = 300 * time.Millisecond })
	rc := dialRaw(t, ts, 1<<30, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	// No more reads: TCP's buffers fill, then the server's write blocks.
	select {
	case err := <-result:
		if err == nil {
			t.Fatal("nil error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler still writes to a client that reads nothing")
	}
}

func TestExpectContinue(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}), nil)
	c := ts.Client()
	c.Transport.(*http.Transport).ExpectContinueTimeout = 10 * time.Second
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("payload"))
	req.Header.Set("Expect", "100-continue")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "payload" {
		t.Errorf("body %q", body)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the client waited for its timeout instead of 100 Continue")
	}
}

// TestShutdown: http.Server.Shutdown lets running requests finish, sends
// GOAWAY, and returns once the connections are closed.
func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}), nil)
	c := ts.Client()
	got := make(chan string, 1)
	go func() {
		resp, err := c.Get(ts.URL + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- ts.Config.Shutdown(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request running: %v", err)
	default:
	}
	close(release)
	if b := <-got; b != "done" {
		t.Errorf("the running request got %q", b)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := start(t, http.NotFoundHandler(), func(s *Server) { s.IdleTimeout = 200 * time.Millisecond })
	rc := dialRaw(t, ts, 1<<30)
	ga := rc.expectGoAway()
	if ga.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY %v", ga.ErrCode)
	}
	if err := rc.readUntilClosed(); err != nil {
		t.Error(err)
	}
}

func TestHeaderListTooLong(t *testing.T) {
	ts := start(t, http.NotFoundHandler(), func(s *Server) { s.MaxHeaderBytes = 1000 })
	rc := dialRaw(t, ts, 1<<30)
	// Each field within the limit, the list past it (a field past it
	// alone breaks HPACK's string limit: a connection error).
	big := strings.Repeat("a", 300)
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x",
		"x-1", big, "x-2", big, "x-3", big, "x-4", big, "x-5", big)
	for {
		if f, ok := rc.next().(*http2.MetaHeadersFrame); ok {
			if status := f.PseudoValue("status"); status != "431" {
				t.Errorf("status %s, want 431", status)
			}
			return
		}
	}
}

// TestMaxStreams: streams past MAX_CONCURRENT_STREAMS are refused, and
// handlers of streams the client reset still count until they return,
// so that resetting streams does not run more handlers than that.
func TestMaxStreams(t *testing.T) {
	const limit = 5
	var running, peak atomic.Int32
	release := make(chan struct{})
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
	}), func(s *Server) { s.MaxConcurrentStreams = limit })
	rc := dialRaw(t, ts, 1<<30)
	rc.waitSettingsAck()
	get := []string{":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x"}
	var open []uint32
	id := uint32(1)
	openStreams := func() {
		for range limit {
			rc.headers(id, true, get...)
			open = append(open, id)
			id += 2
		}
	}
	openStreams()
	rc.headers(id, true, get...)
	rc.expectReset(id, http2.ErrCodeProtocol)
	id += 2
	// Reset the open streams and open as many again, twice: the reset
	// streams' handlers still run, so the new ones wait for them.
	for range 2 {
		for _, o := range open {
			rc.reset(o)
		}
		open = open[:0]
		openStreams()
	}
	// The limit's worth of handlers runs; the others wait for them.
	for deadline := time.Now().Add(10 * time.Second); running.Load() < limit && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if p := peak.Load(); p != limit {
		t.Errorf("%d handlers ran at once, want the limit, %d", p, limit)
	}
	close(release)
	// The waiting handlers run once the others return: the streams still
	// open are answered.
	answered := map[uint32]bool{}
	for len(answered) < len(open) {
		if f, ok := rc.next().(*http2.MetaHeadersFrame); ok {
			answered[f.StreamID] = true
		}
	}
	for _, o := range open {
		if !answered[o] {
			t.Errorf("stream %d not answered", o)
		}
	}
}

// rawConn is an HTTP/2 client made of a Framer, for what a well-behaved
// client never sends.
type rawConn struct {
	t    *testing.T
	tc   *tls.Conn
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer
}

func dialRaw(t *testing.T, ts *httptest.Server, connWindow uint32, settings ...http2.Setting) *rawConn {
	t.Helper()
	tc, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a test server's certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	rc := &rawConn{t: t, tc: tc, fr: http2.NewFramer(tc, tc)}
	rc.henc = hpack.NewEncoder(&rc.hbuf)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteWindowUpdate(0, connWindow-65535); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *rawConn) headers(id uint32, end bool, kv ...string) {
	rc.t.Helper()
	rc.hbuf.Reset()
	for i := 0; i < len(kv); i += 2 {
		_ = rc.henc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) reset(id uint32) {
	rc.t.Helper()
	if err := rc.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
		rc.t.Fatal(err)
	}
}

// next reads the next frame, within 10 s.
func (rc *rawConn) next() http2.Frame {
	rc.t.Helper()
	_ = rc.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := rc.fr.ReadFrame()
	if err != nil {
		rc.t.Fatal(err)
	}
	return f
}

func (rc *rawConn) waitSettingsAck() {
	rc.t.Helper()
	for {
		if f, ok := rc.next().(*http2.SettingsFrame); ok && !f.IsAck() {
			if err := rc.fr.WriteSettingsAck(); err != nil {
				rc.t.Fatal(err)
			}
			return
		}
	}
}

func (rc *rawConn) expectReset(id uint32, code http2.ErrCode) {
	rc.t.Helper()
	for {
		if f, ok := rc.next().(*http2.RSTStreamFrame); ok && f.StreamID == id {
			if f.ErrCode != code {
				rc.t.Errorf("stream %d reset with %v, want %v", id, f.ErrCode, code)
			}
			return
		}
	}
}

func (rc *rawConn) expectGoAway() *http2.GoAwayFrame {
	rc.t.Helper()
	for {
		if f, ok := rc.next().(*http2.GoAwayFrame); ok {
			return f
		}
	}
}

func (rc *rawConn) readUntilClosed() error {
	_ = rc.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, rc.tc)
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the server did not close the connection")
	}
	return nil
}

// TestWriterAfterReturn: a handler that kept its writer and uses it once
// it returned gets a panic, as from net/http's HTTP/2 server, and no
// other request's response sees what it writes (the response state it
// had is recycled).
func TestWriterAfterReturn(t *testing.T) {
	kept := make(chan http.ResponseWriter, 1)
	release, answered := make(chan struct{}), make(chan struct{})
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keep" {
			kept <- w
			return
		}
		w.Header().Set("X-Mine", "1")
		close(answered)
		<-release
		_, _ = io.WriteString(w, "mine")
	}), func(s *Server) { s.MaxConcurrentStreams = 1 })
	c := ts.Client()
	resp, err := c.Get(ts.URL + "/keep")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stale := <-kept
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Get(ts.URL + "/other")
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	// The other handler runs, with a writer from the pool; with one
	// handler at a time, the first one's end, its writer's release
	// included, came before.
	<-answered
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	if !panics(func() { stale.Header().Set("X-Leak", "1") }) || !panics(func() { _, _ = stale.Write([]byte("leak")) }) {
		t.Error("a returned handler's writer still works")
	}
	close(release)
	resp = <-done
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "mine" || resp.Header.Get("X-Leak") != "" || resp.Header.Get("X-Mine") != "1" {
		t.Errorf("the other response: %q, header %v", body, resp.Header)
	}
}

// TestResetQueuedStream: the body a queued stream received (its handler
// waiting for a free slot) goes back to the connection's window when the
// client resets the stream, though its handler never runs; else a few
// such resets would stall every request body of the connection.
func TestResetQueuedStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }),
		func(s *Server) { s.MaxConcurrentStreams = 1 })
	rc := dialRaw(t, ts, 1<<30)
	rc.waitSettingsAck()
	// The server opens its connection window past the initial 64 KiB.
	for {
		if f, ok := rc.next().(*http2.WindowUpdateFrame); ok && f.StreamID == 0 {
			break
		}
	}
	// Stream 1's handler holds the only slot, and keeps it after the reset.
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	rc.reset(1)
	rc.headers(3, false, ":method", "POST", ":path", "/", ":scheme", "https", ":authority", "x")
	const sent = 20 * 16 << 10 // more than the quarter of the window that is given back at once
	chunk := make([]byte, 16<<10)
	for range sent / len(chunk) {
		if err := rc.fr.WriteData(3, false, chunk); err != nil {
			t.Fatal(err)
		}
	}
	rc.reset(3)
	var back uint32
	for back < sent {
		if f, ok := rc.next().(*http2.WindowUpdateFrame); ok && f.StreamID == 0 {
			back += f.Increment
		}
	}
}

// TestBadFirstSettings: a first SETTINGS frame with a value out of range
// is a connection error the client hears of, with its code, in a GOAWAY
// (as from net/http's server), not a bare close.
func TestBadFirstSettings(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
	for _, tc := range []struct {
		setting http2.Setting
		code    http2.ErrCode
	}{
		{http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31}, http2.ErrCodeFlowControl},
		{http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 24}, http2.ErrCodeProtocol},
		{http2.Setting{ID: http2.SettingEnablePush, Val: 2}, http2.ErrCodeProtocol},
	} {
		rc := dialRaw(t, ts, 1<<30, tc.setting)
		if f := rc.expectGoAway(); f.ErrCode != tc.code {
			t.Errorf("%v: GOAWAY %v, want %v", tc.setting, f.ErrCode, tc.code)
		}
	}
	// A first frame larger than the server's SETTINGS_MAX_FRAME_SIZE
	// (16 KiB, 6 bytes a setting) is a FRAME_SIZE_ERROR, as later.
	many := slices.Repeat([]http2.Setting{{ID: http2.SettingHeaderTableSize, Val: 4096}}, 3000)
	rc := dialRaw(t, ts, 1<<30, many...)
	if f := rc.expectGoAway(); f.ErrCode != http2.ErrCodeFrameSize {
		t.Errorf("a 18,000-byte first SETTINGS: GOAWAY %v, want %v", f.ErrCode, http2.ErrCodeFrameSize)
	}
}

// TestSettingsAckBeforeReleasedData: a SETTINGS frame that opens a
// stream's window is acknowledged before the data it lets out (h2spec's
// 6.9.2 waits for the ACK, then for the DATA, and timed out when they
// came the other way round). The order was a race lost now and then;
// many rounds make it show.
func TestSettingsAckBeforeReleasedData(t *testing.T) {
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), nil)
	rc := dialRaw(t, ts, 1<<30, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.waitSettingsAck()
	window := func(v uint32) {
		t.Helper()
		if err := rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: v}); err != nil {
			t.Fatal(err)
		}
	}
	// The first SETTINGS' ACK, then each round's own.
	for acked := false; !acked; {
		f, ok := rc.next().(*http2.SettingsFrame)
		acked = ok && f.IsAck()
	}
	for id := uint32(1); id < 400; id += 2 {
		rc.headers(id, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
		for { // the response's HEADERS: its writer waits for window
			if f, ok := rc.next().(*http2.MetaHeadersFrame); ok && f.StreamID == id {
				break
			}
		}
		window(1)
		switch f := rc.next().(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				t.Fatalf("stream %d: a SETTINGS frame, not its ACK", id)
			}
		case *http2.DataFrame:
			t.Fatalf("stream %d: %d bytes of DATA before the SETTINGS ACK", id, len(f.Data()))
		default:
			t.Fatalf("stream %d: %T before the SETTINGS ACK", id, f)
		}
		if f, ok := rc.next().(*http2.DataFrame); !ok || len(f.Data()) != 1 {
			t.Fatalf("stream %d: %v, want one byte of DATA", id, f)
		}
		rc.reset(id)
		window(0)
		if f, ok := rc.next().(*http2.SettingsFrame); !ok || !f.IsAck() {
			t.Fatalf("stream %d: %v, want the SETTINGS ACK", id, f)
		}
	}
}
