package multi

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// balancer is a TCP load balancer in front of the replicas, as the
// deployment guide puts one: each connection goes to the next replica that
// accepts it, so a client whose replica died reconnects to another at
// once. TLS passes through; every replica's serving certificate covers
// 127.0.0.1, the balancer's address.
type balancer struct {
	ln       net.Listener
	backends []string

	mu    sync.Mutex // guards next and conns
	next  int
	conns map[net.Conn]bool

	wg sync.WaitGroup
}

func startBalancer(t testing.TB, backends []string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]bool{}}
	b.wg.Go(b.serve)
	t.Cleanup(b.close)
	return b
}

// URL is the balancer's https URL.
func (b *balancer) URL() string { return "https://" + b.ln.Addr().String() }

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.forward(c) })
	}
}

// forward connects c to the first replica, from the next in turn, that
// accepts a connection, and copies both ways until either side closes.
func (b *balancer) forward(c net.Conn) {
	defer c.Close()
	var up net.Conn
	for range b.backends {
		b.mu.Lock()
		addr := b.backends[b.next%len(b.backends)]
		b.next++
		b.mu.Unlock()
		var err error
		if up, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	if !b.track(c, up) {
		return
	}
	defer b.untrack(c, up)
	done := make(chan struct{}, 2) // one per direction; never blocks
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	// One side is done: close both so the other copy ends too.
	c.Close()
	up.Close()
	<-done
}

func (b *balancer) track(conns ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	for _, c := range conns {
		b.conns[c] = true
	}
	return true
}

func (b *balancer) untrack(conns ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range conns {
		delete(b.conns, c)
	}
}

// close stops accepting, cuts every connection and waits for the
// forwarding goroutines.
func (b *balancer) close() {
	err := b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	if err == nil || errors.Is(err, net.ErrClosed) {
		b.wg.Wait()
	}
}
