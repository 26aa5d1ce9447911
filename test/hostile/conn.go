package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2's numbers the attacks use.
const (
	maxWindow     = 1<<31 - 1
	initialWindow = 65535
	// maxFrame is the frame size every server accepts.
	maxFrame = 16384
)

// setupTimeout bounds a connection's setup: the dial, the handshakes and
// the first answer (a large list can take a second to render with the
// race detector on).
const setupTimeout = 30 * time.Second

// conn is one attacking HTTP/2 connection. The attack's goroutine writes;
// a reader goroutine (goRead), when there is one, reads and answers the
// server's SETTINGS and PINGs.
type conn struct {
	tg  Target
	raw net.Conn // under nc: closed directly, as tls.Conn.Close may wait to write its alert
	nc  *tls.Conn
	fr  *http2.Framer
	bw  *bufio.Writer
	cw  countingWriter
	// start is when the attack began on the connection.
	start time.Time
	// closed is closed once the server ended the connection (GOAWAY, EOF
	// or reset).
	closed    chan struct{}
	closeOnce sync.Once
	// ending is set as the attack closes the connection itself: errors
	// from then on are its own.
	ending  atomic.Bool
	readers sync.WaitGroup

	// wmu guards the writing side (bw, the Framer's writes, henc, hbuf,
	// nextID) once a reader goroutine writes too.
	wmu     sync.Mutex
	henc    *hpack.Encoder
	hbuf    bytes.Buffer
	noIndex bool // header fields never enter HPACK's dynamic table
	// silent: the reader writes nothing (the client's own bytes are
	// still on their way).
	silent bool
	nextID uint32

	mu  sync.Mutex // guards res
	res ConnResult
}

// countingWriter counts the frames the Framer writes (one Write each)
// and their bytes.
type countingWriter struct {
	w             io.Writer
	frames, bytes atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.frames.Add(1)
	w.bytes.Add(int64(len(p)))
	return w.w.Write(p)
}

// dial connects to the target (rcvbuf: see dialTLS). The connection's
// setup is bounded by setupTimeout.
func (c *conn) dial(ctx context.Context, rcvbuf int) error {
	nc, err := dialTLS(ctx, c.tg, rcvbuf)
	if err != nil {
		return err
	}
	c.nc = nc
	c.raw = nc.NetConn()
	c.bw = bufio.NewWriterSize(nc, 64<<10)
	c.cw.w = c.bw
	c.fr = http2.NewFramer(&c.cw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 16 << 20
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.nextID = 1
	return nc.SetDeadline(time.Now().Add(setupTimeout))
}

// handshake sends the preface and settings, and reads until the
// server's SETTINGS, which it acknowledges.
func (c *conn) handshake(settings ...http2.Setting) error {
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	c.cw.bytes.Add(int64(len(http2.ClientPreface)))
	if err := c.fr.WriteSettings(settings...); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("reading the server's SETTINGS: %w", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
			c.res.MaxStreams = v
		}
		if err := c.fr.WriteSettingsAck(); err != nil {
			return err
		}
		return c.bw.Flush()
	}
}

// begin starts the attack proper: the connection's clock, and its
// deadlines at d from now, or now once ctx ends. It returns the end.
func (c *conn) begin(ctx context.Context, d time.Duration) (end time.Time, stop func() bool) {
	c.start = time.Now()
	end = c.start.Add(d)
	_ = c.nc.SetWriteDeadline(end)
	_ = c.nc.SetReadDeadline(time.Time{})
	stop = context.AfterFunc(ctx, func() { _ = c.nc.SetWriteDeadline(time.Now()) })
	return end, stop
}

// wait waits until the attack's end, ctx's, or the server's close.
func (c *conn) wait(ctx context.Context, end time.Time) {
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-c.closed:
	}
}

// headerBlock encodes a request's header block.
func (c *conn) headerBlock(method, path string) []byte {
	c.hbuf.Reset()
	fields := []hpack.HeaderField{
		{Name: ":method", Value: method},
		{Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: c.tg.Addr},
		{Name: ":path", Value: path},
		{Name: "user-agent", Value: "leasehold-hostile"},
		{Name: "accept", Value: "application/json"},
	}
	if c.tg.Token != "" {
		fields = append(fields, hpack.HeaderField{Name: "authorization", Value: "Bearer " + c.tg.Token})
	}
	for _, f := range fields {
		f.Sensitive = c.noIndex
		_ = c.henc.WriteField(f)
	}
	return c.hbuf.Bytes()
}

// request opens a stream (c.wmu held when a reader runs) and returns
// its id.
func (c *conn) request(method, path string, endStream bool) (uint32, error) {
	id := c.nextID
	c.nextID += 2
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: c.headerBlock(method, path), EndStream: endStream, EndHeaders: true,
	})
	c.mu.Lock()
	c.res.Streams++
	c.mu.Unlock()
	return id, err
}

// serverClosed notes that the server ended the connection, as err (a
// read or write error) says, unless the attack is closing it itself.
func (c *conn) serverClosed(err error) {
	if c.ending.Load() || isTimeout(err) {
		return
	}
	c.mu.Lock()
	if c.res.Closed == 0 {
		c.res.Closed = max(time.Since(c.start), time.Nanosecond)
		c.res.How = closedHow(err)
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.closed) })
}

// goAway notes a GOAWAY: the server is ending the connection.
func (c *conn) goAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	if c.res.Closed == 0 {
		c.res.Closed = max(time.Since(c.start), time.Nanosecond)
	}
	if c.res.How == "" || c.res.How == "EOF" || c.res.How == "reset" {
		c.res.How = "GOAWAY " + f.ErrCode.String()
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.closed) })
}

// note records what a frame from the server says: resets, answers,
// GOAWAY. It reports the stream that frame ended, if any.
func (c *conn) note(f http2.Frame) (ended uint32) {
	switch f := f.(type) {
	case *http2.GoAwayFrame:
		c.goAway(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		if c.res.Resets == nil {
			c.res.Resets = map[http2.ErrCode]int{}
		}
		c.res.Resets[f.ErrCode]++
		if c.res.FirstReset == 0 {
			c.res.FirstReset = max(time.Since(c.start), time.Nanosecond)
		}
		c.mu.Unlock()
		return f.StreamID
	case *http2.MetaHeadersFrame:
		if s, err := strconv.Atoi(f.PseudoValue("status")); err == nil && s >= 200 {
			c.mu.Lock()
			if c.res.Statuses == nil {
				c.res.Statuses = map[int]int{}
			}
			c.res.Statuses[s]++
			c.mu.Unlock()
		}
		if f.StreamEnded() {
			return f.StreamID
		}
	case *http2.DataFrame:
		if f.StreamEnded() {
			return f.StreamID
		}
	}
	return 0
}

// goRead reads the server's frames until the connection ends,
// acknowledging SETTINGS and PINGs and noting the rest; then, when set,
// is called with each frame and the stream it ended, if any.
func (c *conn) goRead(then func(f http2.Frame, ended uint32)) {
	c.readers.Go(func() {
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				c.serverClosed(err)
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && !c.silent {
					c.writeLocked(func() error { return c.fr.WriteSettingsAck() })
				}
			case *http2.PingFrame:
				if !f.IsAck() && !c.silent {
					c.writeLocked(func() error { return c.fr.WritePing(true, f.Data) })
				}
			}
			ended := c.note(f)
			if then != nil {
				then(f, ended)
			}
		}
	})
}

// writeLocked writes frames under c.wmu and flushes them; a failure is
// the server's close.
func (c *conn) writeLocked(write func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := write()
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.serverClosed(err)
	}
	return err
}

// drain reads what the server sent before it closed the connection,
// for a GOAWAY: for a second at most and at most 64 MiB (the rest of a
// stalled answer comes first).
func (c *conn) drain() {
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	for read := 0; read < 64<<20; {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			c.goAway(g)
			return
		}
		read += int(f.Header().Length)
	}
}

// close ends the connection from the client's side and waits for its
// reader.
func (c *conn) close() {
	c.ending.Store(true)
	if c.raw != nil {
		_ = c.raw.Close()
	}
	c.readers.Wait()
}

// result is the connection's story.
func (c *conn) result() ConnResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.res
	r.Frames = c.cw.frames.Load()
	r.Bytes = c.cw.bytes.Load()
	return r
}

// run runs attack on o.Conns connections at once, calls o.AtEnd once
// every one is done, then closes them.
func run(ctx context.Context, tg Target, o Options, name string, attack func(ctx context.Context, c *conn) error) Report {
	conns := make([]*conn, o.conns())
	var wg sync.WaitGroup
	for i := range conns {
		c := &conn{tg: tg, closed: make(chan struct{})}
		conns[i] = c
		wg.Go(func() {
			if err := attack(ctx, c); err != nil {
				c.mu.Lock()
				c.res.Err = err
				c.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if o.AtEnd != nil {
		o.AtEnd()
	}
	r := Report{Attack: name}
	for _, c := range conns {
		c.close()
		r.Conns = append(r.Conns, c.result())
	}
	return r
}
