package transport

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/leasehold/leasehold/internal/h2server"
)

// serve starts New's server for cfg on loopback with httptest's
// certificate.
func serve(t *testing.T, cfg Config) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS() // for its certificate
	cert := ts.TLS.Certificates
	ts.Close()
	cfg.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	cfg.TLSConfig = &tls.Config{Certificates: cert}
	hs, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = Serve(hs, ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// firstSettings dials addr with HTTP/2 and returns the server's first
// SETTINGS, and the framer for more.
func firstSettings(t *testing.T, addr string) (map[http2.SettingID]uint32, *http2.Framer) {
	t.Helper()
	tc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a test server
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q", p)
	}
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v", f)
	}
	settings := map[http2.SettingID]uint32{}
	_ = sf.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
	return settings, fr
}

// TestHTTP2Servers: either HTTP/2 server serves, with the same stream
// limit, and reports the errors of clients; the choice is real (their
// SETTINGS differ: net/http's announces a larger frame size).
func TestHTTP2Servers(t *testing.T) {
	for _, tc := range []struct {
		http2      string
		goSettings bool
	}{
		{"", false},
		{HTTP2Leasehold, false},
		{HTTP2Go, true},
	} {
		t.Run(tc.http2, func(t *testing.T) {
			var mu sync.Mutex
			var kinds []string
			addr := serve(t, Config{HTTP2: tc.http2, OnClientError: func(e h2server.ClientError) {
				mu.Lock()
				defer mu.Unlock()
				kinds = append(kinds, e.Kind)
			}})
			settings, fr := firstSettings(t, addr)
			if got := settings[http2.SettingMaxConcurrentStreams]; got != MaxConcurrentStreams {
				t.Errorf("MAX_CONCURRENT_STREAMS %d, want %d", got, MaxConcurrentStreams)
			}
			if _, ok := settings[http2.SettingMaxFrameSize]; ok != tc.goSettings {
				t.Errorf("SETTINGS %v: is it net/http's server? %v, want %v", settings, ok, tc.goSettings)
			}
			// A stream depending on itself: a protocol error, counted.
			if err := fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n := len(kinds)
				mu.Unlock()
				if n > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the protocol error was not reported")
				}
			}
			if kinds[0] != h2server.KindProtocol {
				t.Errorf("kinds %v", kinds)
			}

			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}} //nolint:gosec // a test server
			for _, proto := range []string{"HTTP/2.0", "HTTP/1.1"} {
				if proto == "HTTP/1.1" {
					c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test server
				}
				resp, err := c.Get("https://" + addr + "/")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != proto {
					t.Errorf("served %q, want %s", body, proto)
				}
			}
		})
	}
	if _, err := New(Config{HTTP2: "nginx", TLSConfig: &tls.Config{}}); err == nil {
		t.Error("an unknown HTTP/2 server accepted")
	}
}
