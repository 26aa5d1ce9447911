package h2server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientErrors collects what a server reports through OnClientError.
type clientErrors struct {
	mu   sync.Mutex
	seen []ClientError
}

func (ce *clientErrors) record(e ClientError) {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	ce.seen = append(ce.seen, e)
}

// await waits up to 10 s for an error of kind, and says whether the first
// of the connection's errors was flagged as such.
func (ce *clientErrors) await(t *testing.T, kind string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ce.mu.Lock()
		for _, e := range ce.seen {
			if e.Kind == kind {
				ce.mu.Unlock()
				return
			}
		}
		ce.mu.Unlock()
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	t.Errorf("no client error of kind %q reported; got %+v", kind, ce.seen)
}

// startCounted is start with OnClientError recorded.
func startCounted(t *testing.T, h http.Handler, configure func(*Server)) (*httptest.Server, *clientErrors) {
	ce := &clientErrors{}
	ts := start(t, h, func(s *Server) {
		s.OnClientError = ce.record
		if configure != nil {
			configure(s)
		}
	})
	return ts, ce
}

// endless writes an answer that never ends, until its writes fail.
func endless(w http.ResponseWriter, _ *http.Request) {
	chunk := make([]byte, 64<<10)
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// dialStalling dials ts as a client that will not read, with windows
// that let the server send all it has: its writes stall once TCP's
// buffers are full. (A small receive buffer would stall them sooner,
// but the kernel then drops the server's segments, and with them the
// ACKs of what the client sends: both ends stall.)
func dialStalling(t *testing.T, ts *httptest.Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a test server's certificate
	t.Cleanup(func() { tc.Close() })
	rc := &rawConn{t: t, tc: tc, fr: http2.NewFramer(tc, tc)}
	rc.henc = hpack.NewEncoder(&rc.hbuf)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestControlFrameFlood: a client that makes the server queue control
// frames while it reads nothing loses its connection once
// maxQueuedControlFrames are queued, whatever the frame, rather than
// growing the server's memory until the write times out: held, unread,
// then closed. Whether a handler's write is what stalls (an endless
// answer), or the control frames themselves fill TCP's buffers (no
// request at all: the serve goroutine's own writes would stall, and it
// must go on reading to see the flood).
func TestControlFrameFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		// send sends one frame the server answers with a control frame.
		send func(fr *http2.Framer, i int) error
	}{
		{"PING", func(fr *http2.Framer, i int) error { return fr.WritePing(false, [8]byte{byte(i)}) }},
		{"SETTINGS", func(fr *http2.Framer, _ int) error { return fr.WriteSettings() }},
		{"RST_STREAM", func(fr *http2.Framer, _ int) error {
			// A stream depending on itself: a stream error, answered
			// with RST_STREAM.
			return fr.WritePriority(101, http2.PriorityParam{StreamDep: 101})
		}},
	} {
		for _, request := range []bool{true, false} {
			name := tc.name + "/alone"
			if request {
				name = tc.name + "/behind an answer"
			}
			t.Run(name, func(t *testing.T) {
				ts, ce := startCounted(t, http.HandlerFunc(endless), func(s *Server) { s.WriteByteTimeout = time.Hour })
				rc := dialStalling(t, ts)
				if request {
					rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
				}
				var err error
				start := time.Now()
				for i := 0; i < 200*maxQueuedControlFrames && err == nil; i++ {
					_ = rc.tc.SetWriteDeadline(time.Now().Add(2 * defaultHold))
					err = tc.send(rc.fr, i)
				}
				if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the server did not close the connection of a client that reads none of its %ss: %v", tc.name, err)
				}
				t.Logf("closed after %v: %v", time.Since(start), err)
				ce.await(t, KindFlood)
			})
		}
	}
}

// TestWaitingBytes: answers waiting for a window the client never opens
// hold at most MaxWaitingBytes a connection; a stream whose wait would
// pass it is reset with ENHANCE_YOUR_CALM, its handler's write fails.
func TestWaitingBytes(t *testing.T) {
	const body = 1 << 20
	results := make(chan error, 10)
	ts, ce := startCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.Write(make([]byte, body))
		results <- err
	}), func(s *Server) {
		s.MaxWaitingBytes = 2*body + body/2
		s.WriteByteTimeout = time.Hour
	})
	rc := dialRaw(t, ts, 65536, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.waitSettingsAck()
	for id := uint32(1); id <= 5; id += 2 {
		rc.headers(id, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	}
	// Two answers wait; the third is reset.
	for {
		f := rc.next()
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			if rst.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("stream %d reset with %v, want ENHANCE_YOUR_CALM", rst.StreamID, rst.ErrCode)
			}
			break
		}
	}
	select {
	case err := <-results:
		if !errors.Is(err, errWaitingFlood) {
			t.Errorf("the reset stream's write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reset stream's handler is still writing")
	}
	ce.await(t, KindFlood)
	// The two waiting ones go on once the client opens its windows.
	if err := rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("a waiting answer: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting answer was not sent once the window opened")
		}
	}
}

// TestWindowStall: an answer the client gives no window for
// WriteByteTimeout is reset; the connection serves on.
func TestWindowStall(t *testing.T) {
	results := make(chan error, 1)
	ts, ce := startCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		_, err := w.Write(make([]byte, 1<<20))
		results <- err
	}), func(s *Server) { s.WriteByteTimeout = 300 * time.Millisecond })
	rc := dialRaw(t, ts, 65536, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.waitSettingsAck()
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	rc.expectReset(1, http2.ErrCodeCancel)
	select {
	case err := <-results:
		if !errors.Is(err, errStalled) {
			t.Errorf("the stalled stream's write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled stream's handler is still writing")
	}
	ce.await(t, KindStall)
	rc.headers(3, true, ":method", "GET", ":path", "/small", ":scheme", "https", ":authority", "x")
	for {
		if f, ok := rc.next().(*http2.MetaHeadersFrame); ok && f.StreamID == 3 {
			if status := f.PseudoValue("status"); status != "200" {
				t.Errorf("status %s", status)
			}
			return
		}
	}
}

// TestQueuedHeaderBytes: requests waiting for a handler slot hold at
// most maxQueuedHeaderBytes of header fields; past it the connection is
// closed with ENHANCE_YOUR_CALM, though fewer than 4 × the stream limit
// wait.
func TestQueuedHeaderBytes(t *testing.T) {
	release := make(chan struct{})
	ts, ce := startCounted(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }), func(s *Server) {
		s.MaxConcurrentStreams = 100
		s.MaxHeaderBytes = 1 << 20
	})
	t.Cleanup(func() { close(release) }) // before the server's close, which waits for handlers
	rc := dialRaw(t, ts, 1<<30)
	rc.waitSettingsAck()
	// ~160 KiB of fields a request, sent small: one field indexed once,
	// then named by its index.
	big := strings.Repeat("v", 4000)
	fields := []string{":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x"}
	for range 40 {
		fields = append(fields, "x-big", big)
	}
	var id uint32 = 1
	for ; id < 2*4*100; id += 2 {
		rc.headers(id, true, fields...)
		// Reset it at once: its handler keeps its slot, later
		// requests wait.
		rc.reset(id)
	}
	ga := rc.expectGoAway()
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("GOAWAY %v", ga.ErrCode)
	}
	ce.await(t, KindFlood)
}

// TestWaitingResetsClose: a client that opens streams again as fast as
// the waiting bound resets them loses its connection after
// 2 × MaxConcurrentStreams resets.
func TestWaitingResetsClose(t *testing.T) {
	ts, ce := startCounted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 1<<20))
	}), func(s *Server) {
		s.MaxConcurrentStreams = 2
		s.MaxWaitingBytes = 1 << 20 // one answer waits, the next is reset
		s.WriteByteTimeout = time.Hour
	})
	rc := dialRaw(t, ts, 65536, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.waitSettingsAck()
	resets := 0
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	for id := uint32(3); id < 200; id += 2 {
		rc.headers(id, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
		_ = rc.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := rc.fr.ReadFrame()
		for err == nil {
			if _, ok := f.(*http2.RSTStreamFrame); ok {
				break // this stream's, or the one that waited before it
			}
			f, err = rc.fr.ReadFrame()
		}
		if err != nil {
			if resets != 4 {
				t.Errorf("closed after %d resets, want 2 × 2", resets)
			}
			ce.await(t, KindFlood)
			return
		}
		resets++
	}
	t.Fatalf("the connection is still open after %d resets", resets)
}

// TestRefusedHeadersHeld: header blocks past MAX_HEADER_LIST_SIZE are
// answered 431, each costing the server the whole block's decoding (an
// "HPACK bomb"); past maxRefusedHeaders the connection is a flood: read
// no more (a PING sent then is not answered) and ended by a GOAWAY
// ENHANCE_YOUR_CALM only after the hold, so that the client cannot
// open its next connection at once.
func TestRefusedHeadersHeld(t *testing.T) {
	ts, ce := startCounted(t, http.NotFoundHandler(), func(s *Server) { s.MaxHeaderBytes = 1000 })
	rc := dialRaw(t, ts, 65536)
	big := strings.Repeat("b", 300) // each field within HPACK's string limit, the list past it
	for i := range maxRefusedHeaders {
		id := uint32(2*i + 1)
		rc.headers(id, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x", "x-1", big, "x-2", big, "x-3", big, "x-4", big)
		for {
			if f, ok := rc.next().(*http2.MetaHeadersFrame); ok && f.StreamID == id {
				if status := f.PseudoValue("status"); status != "431" {
					t.Fatalf("stream %d: status %s, want 431", id, status)
				}
				break
			}
		}
	}
	rc.headers(2*maxRefusedHeaders+1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x", "x-1", big, "x-2", big, "x-3", big, "x-4", big)
	sent := time.Now()
	if err := rc.fr.WritePing(false, [8]byte{7}); err != nil {
		t.Fatal(err)
	}
	ce.await(t, KindFlood)
	for {
		switch f := rc.next().(type) {
		case *http2.PingFrame:
			t.Fatal("the server read a frame sent after the connection's bound")
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", f.ErrCode)
			}
			if held := time.Since(sent); held < defaultHold {
				t.Errorf("GOAWAY after %v, want the hold, %v", held, defaultHold)
			}
			return
		}
	}
}

// TestWindowOverrunStalled: the connection's receive window grows only
// with the WINDOW_UPDATEs the server could write. A client that stalls
// the server's writes and sends DATA (on a closed stream: every frame
// "returned" at once) overruns it after the window, a flow-control
// error: without this it could have the server decrypt all it sends
// until maxQueuedControlFrames RST_STREAMs pile up (160 MiB of 16 KiB
// frames).
func TestWindowOverrunStalled(t *testing.T) {
	ts, ce := startCounted(t, http.HandlerFunc(endless), func(s *Server) { s.WriteByteTimeout = time.Hour })
	rc := dialStalling(t, ts)
	rc.headers(1, true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x")
	time.Sleep(200 * time.Millisecond) // the endless answer fills TCP's buffers
	frame := make([]byte, 16<<10)
	const limit = 16 << 20
	sent := 0
	for ; sent < limit; sent += len(frame) {
		_ = rc.tc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if err := rc.fr.WriteData(1, false, frame); err != nil {
			break // the server stopped reading
		}
	}
	t.Logf("sent %d KiB of DATA", sent>>10)
	ce.await(t, KindFlood)
	ce.mu.Lock()
	defer ce.mu.Unlock()
	for _, e := range ce.seen {
		if ke := (kindError{}); !errors.As(e.Err, &ke) || ke.cause != errWindowOverrun {
			t.Errorf("client error %v, want the window's overrun", e.Err)
		}
	}
}

// TestShutdownEndsHold: a server shutting down does not wait for the
// hold of a client past a bound: the held connection closes with the
// others.
func TestShutdownEndsHold(t *testing.T) {
	ts, ce := startCounted(t, http.NotFoundHandler(), func(s *Server) { s.MaxHeaderBytes = 1000 })
	rc := dialRaw(t, ts, 65536)
	big := strings.Repeat("b", 300)
	for i := range maxRefusedHeaders + 1 {
		rc.headers(uint32(2*i+1), true, ":method", "GET", ":path", "/", ":scheme", "https", ":authority", "x", "x-1", big, "x-2", big, "x-3", big, "x-4", big)
	}
	ce.await(t, KindFlood)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*defaultHold)
	defer cancel()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= defaultHold {
		t.Errorf("shutdown took %v: it waited for the hold (%v)", took, defaultHold)
	} else {
		t.Logf("shutdown took %v", took)
	}
}
