package h2server

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// writeSizes records the size of each write to its connections.
type writeSizes struct {
	net.Listener
	mu    sync.Mutex
	sizes []int
}

func (l *writeSizes) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	return sizedConn{nc, l}, err
}

type sizedConn struct {
	net.Conn
	l *writeSizes
}

func (c sizedConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	c.l.sizes = append(c.l.sizes, len(b))
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

// TestCorkedWrites: through a Listener, the records of a response
// written at once reach the connection in one write, and read back whole.
func TestCorkedWrites(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 3700) // 59,200 bytes: four records
	for _, corked := range []bool{false, true} {
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(body)
		}))
		ts.EnableHTTP2 = true
		Configure(ts.Config, &Server{ErrorLog: log.New(testWriter{t}, "", 0)})
		sizes := &writeSizes{Listener: ts.Listener}
		ts.Listener = sizes
		if corked {
			ts.Listener = Listener(sizes)
		}
		ts.StartTLS()
		c := client(ts, 0, 0)
		// Past crypto/tls's small first records (its first 128 KiB).
		for range 4 {
			resp, err := c.Get(ts.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("corked %v: read %d bytes (%v), want the %d written", corked, len(got), err, len(body))
			}
		}
		ts.Close()
		sizes.mu.Lock()
		largest := 0
		for _, n := range sizes.sizes {
			largest = max(largest, n)
		}
		sizes.mu.Unlock()
		if whole := largest > len(body); whole != corked {
			t.Errorf("corked %v: largest write %d bytes, a %d-byte response", corked, largest, len(body))
		}
	}
}
