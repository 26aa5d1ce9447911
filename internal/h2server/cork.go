package h2server

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// Listener returns l with its connections able to take the TLS records
// of one write in one system call; serve on it (net/http's ServeTLS
// wraps it in TLS). crypto/tls writes each record of up to 16 KiB by
// itself, and on loopback much of a write's cost is per call (the
// reader is woken for each): a 45 KB watch event is three calls, and a
// delivery to 500 watchers cost ~10% more CPU so (measured with a bare
// TLS server). A connection ServeConn does not find so is served
// without.
func Listener(l net.Listener) net.Listener { return corkListener{l} }

type corkListener struct{ net.Listener }

func (l corkListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: nc}, nil
}

// corkConn holds what is written to it between cork and uncork, and
// writes it then in one call. Its writer is the TLS connection above
// it, which writes under a lock of its own; mu keeps those writes in
// order with uncork's, which runs outside that lock (a TLS alert
// written just after a corked write goes out after it).
type corkConn struct {
	net.Conn
	mu   sync.Mutex
	held *[]byte // while corked
	// writing is set while uncork writes (outside TLS's lock), aborted
	// once abortWrite ran: each side checks the other's after setting
	// its own, so a stalled write is always closed (see abortWrite).
	writing, aborted atomic.Bool
}

// corkBuffers hold the records of corked writes: taken at cork, given
// back at uncork, so that no idle connection keeps one.
var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2*maxBuffered); return &b }}

// corkFor is tc's corkConn, or nil when tc is not over one.
func corkFor(tc *tls.Conn) *corkConn {
	cc, _ := tc.NetConn().(*corkConn)
	return cc
}

func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		*c.held = append(*c.held, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.held = getBuffer(&corkBuffers)
	c.mu.Unlock()
}

// uncork writes what was held.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.held
	c.held = nil
	c.writing.Store(true)
	var err error
	if c.aborted.Load() {
		err = c.Conn.Close() // abortWrite may have looked before writing was set
		if err == nil {
			err = net.ErrClosed
		}
	} else {
		_, err = c.Conn.Write(*p)
	}
	c.writing.Store(false)
	putBuffer(&corkBuffers, p, *p, 4*maxBuffered)
	return err
}

// abortWrite closes the connection under TLS when uncork is writing. A
// TLS close would otherwise queue its close_notify behind that write,
// which a client that stopped reading does not let finish: crypto/tls,
// when its own Write is under way, closes so too.
func (c *corkConn) abortWrite() {
	c.aborted.Store(true)
	if c.writing.Load() {
		_ = c.Conn.Close()
	}
}
