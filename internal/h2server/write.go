package h2server

import (
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The write side of a connection. Frames are encoded into c.out under
// c.wmu, in the order they are to be sent (HPACK's state requires it),
// and written to the connection by the first goroutine that finds
// nobody writing; frames queued meanwhile go out with its next write.
// A handler waits until its frames are written, so a client that stops
// reading slows its handlers down instead of growing buffers; the serve
// goroutine, writing control frames, waits only when it is the writer.

// maxBuffered is how much a response queues before it is written: four
// DATA frames of HTTP/2's default size.
const maxBuffered = 64 << 10

// statusValues are the :status values, by code.
var statusValues = func() (v [1000]string) {
	for i := range v {
		v[i] = strconv.Itoa(i)
	}
	return v
}()

// headerBlock is a response's header fields: the status and the fields
// taken from the handler's header map when it wrote the header.
type headerBlock struct {
	status int
	fields []hpack.HeaderField
}

// outBuffers hold frames while they are queued, and bodyBuffers the
// bodies of responses being written: a connection keeps none while idle
// (hundreds of watch connections are idle most of the time).
var (
	outBuffers  = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}
	bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, bufSize); return &b }}
)

// getBuffer takes a buffer from pool; putBuffer gives it back, unless it
// grew past max.
func getBuffer(pool *sync.Pool) *[]byte { return pool.Get().(*[]byte) }

func putBuffer(pool *sync.Pool, p *[]byte, b []byte, max int) {
	if cap(b) <= max {
		*p = b[:0]
		pool.Put(p)
	}
}

func (c *conn) appendFrameHeader(length int, t http2.FrameType, flags http2.Flags, id uint32) {
	if c.out == nil {
		c.outBuf = getBuffer(&outBuffers)
		c.out = (*c.outBuf)[:0]
	}
	c.out = append(c.out,
		byte(length>>16), byte(length>>8), byte(length),
		byte(t), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
	c.queuedBytes += int64(9 + length)
}

func (c *conn) appendFrame(t http2.FrameType, flags http2.Flags, id uint32, payload ...byte) {
	c.appendFrameHeader(len(payload), t, flags, id)
	c.out = append(c.out, payload...)
}

// appendControl queues a connection's control frame (a PING or SETTINGS
// ACK); like every frame queued in answer to a client, it counts against
// maxQueuedControlFrames (queuedControl).
func (c *conn) appendControl(t http2.FrameType, flags http2.Flags, payload ...byte) {
	c.appendFrame(t, flags, 0, payload...)
	c.queuedControl()
}

func (c *conn) appendSettings(settings ...http2.Setting) {
	c.appendFrameHeader(6*len(settings), http2.FrameSettings, 0, 0)
	for _, s := range settings {
		c.out = binary.BigEndian.AppendUint16(c.out, uint16(s.ID))
		c.out = binary.BigEndian.AppendUint32(c.out, s.Val)
	}
	c.queuedControl()
}

func (c *conn) appendWindowUpdate(id, incr uint32) {
	if id == 0 {
		c.outGrant += int32(incr)
	}
	c.appendFrameHeader(4, http2.FrameWindowUpdate, 0, id)
	c.out = binary.BigEndian.AppendUint32(c.out, incr&0x7fffffff)
	c.queuedControl()
}

func (c *conn) appendRST(id uint32, code http2.ErrCode) {
	c.appendFrameHeader(4, http2.FrameRSTStream, 0, id)
	c.out = binary.BigEndian.AppendUint32(c.out, uint32(code))
	c.queuedControl()
}

func (c *conn) appendGoAway(last uint32, code http2.ErrCode) {
	c.appendFrameHeader(8, http2.FrameGoAway, 0, 0)
	c.out = binary.BigEndian.AppendUint32(c.out, last&0x7fffffff)
	c.out = binary.BigEndian.AppendUint32(c.out, uint32(code))
	c.queuedControl()
}

func (c *conn) appendData(id uint32, data []byte, end bool) {
	var flags http2.Flags
	if end {
		flags = http2.FlagDataEndStream
	}
	c.appendFrameHeader(len(data), http2.FrameData, flags, id)
	c.out = append(c.out, data...)
}

// appendHeaders encodes h and queues it as a HEADERS frame and as many
// CONTINUATION frames as the client's frame size needs.
func (c *conn) appendHeaders(id uint32, h *headerBlock, end bool) {
	c.hbuf.Reset()
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusValues[h.status]})
	for _, f := range h.fields {
		_ = c.henc.WriteField(f)
	}
	block := c.hbuf.Bytes()
	t := http2.FrameHeaders
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), int(c.peerMaxFrame))
		var flags http2.Flags
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders
		}
		if first && end {
			flags |= http2.FlagHeadersEndStream
		}
		c.appendFrameHeader(n, t, flags, id)
		c.out = append(c.out, block[:n]...)
		block = block[n:]
		t = http2.FrameContinuation
	}
}

// writeStream sends st's response: its headers when h is set, then the
// parts of data within the flow-control windows, ending the stream when
// end is set. It returns once the frames are written, or why they
// cannot be.
func (c *conn) writeStream(st *stream, h *headerBlock, end bool, parts ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.streamWriteErr(st); err != nil {
		return err
	}
	left := 0 // bytes still to send
	for _, p := range parts {
		left += len(p)
	}
	if h != nil {
		onlyHeaders := end && left == 0
		c.appendHeaders(st.id, h, onlyHeaders)
		if onlyHeaders {
			st.endSent = true
		}
	}
	for _, data := range parts {
		for len(data) > 0 {
			n := min(int64(len(data)), st.sendWindow, c.sendWindow, int64(c.peerMaxFrame))
			if n <= 0 {
				// Out of window: what is queued goes out, then the
				// client's WINDOW_UPDATE is awaited.
				if err := c.flushLocked(true); err != nil {
					return err
				}
				if err := c.awaitWindow(st, left); err != nil {
					return err
				}
				continue
			}
			left -= int(n)
			last := end && left == 0
			c.appendData(st.id, data[:n], last)
			st.sendWindow -= n
			c.sendWindow -= n
			data = data[n:]
			if last {
				st.endSent = true
			}
			if len(c.out) >= maxBuffered && left > 0 {
				if err := c.flushLocked(true); err != nil {
					return err
				}
				if err := c.streamWriteErr(st); err != nil {
					return err
				}
			}
		}
	}
	if end && !st.endSent {
		c.appendData(st.id, nil, true)
		st.endSent = true
	}
	return c.flushLocked(true)
}

// writeContinue answers a request's "Expect: 100-continue" as its
// handler first reads the body.
func (c *conn) writeContinue(st *stream) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.streamWriteErr(st) != nil {
		return
	}
	c.appendHeaders(st.id, &headerBlock{status: 100}, false)
	_ = c.flushLocked(false)
}

func (c *conn) streamWriteErr(st *stream) error {
	if st.werr != nil {
		return st.werr
	}
	if st.endSent {
		return errStreamDone
	}
	return c.werr
}

// flushLocked has what is queued written, c.wmu held (it is released
// while writing). With wait, the caller writes it, or, when another
// goroutine is writing, waits until that one has. Without, it does not
// wait: a goroutine of its own writes, unless one is writing already.
// The serve goroutine queues its control frames so: were it to write
// them itself, a client that stops reading would stop it reading too,
// and what that client sends would never meet the control-frame bound.
func (c *conn) flushLocked(wait bool) error {
	if c.flushing {
		if !wait {
			return c.werr
		}
		target := c.queuedBytes
		for c.writtenBytes < target && c.werr == nil {
			c.wcond.Wait()
		}
		return c.werr
	}
	if len(c.out) == 0 || c.werr != nil {
		return c.werr
	}
	c.flushing = true
	if !wait {
		go func() {
			c.wmu.Lock()
			defer c.wmu.Unlock()
			c.writeOutLocked()
		}()
		return nil
	}
	c.writeOutLocked()
	return c.werr
}

// writeOutLocked writes out until nothing is queued, c.wmu held and
// c.flushing set by the caller.
func (c *conn) writeOutLocked() {
	for len(c.out) > 0 && c.werr == nil {
		buf, p := c.out, c.outBuf
		c.out, c.outBuf = nil, nil
		c.writingControl, c.outControl = c.outControl, 0
		grant := c.outGrant
		c.outGrant = 0
		c.wmu.Unlock()
		// The window a WINDOW_UPDATE gives counts from before its write:
		// the client may act on it as soon as it arrives, which can be
		// before write returns. Only the write under way is credited, so
		// a client that stalls it is still held to what it could read.
		if grant > 0 {
			c.grant(grant)
		}
		err := c.write(buf)
		c.wmu.Lock()
		c.writingControl = 0
		c.writtenBytes += int64(len(buf))
		putBuffer(&outBuffers, p, buf, 2*maxBuffered)
		if err != nil && c.werr == nil {
			c.werr = err
			// The serve goroutine sees the close and tears down.
			c.closeTransport()
		}
		c.wcond.Broadcast()
	}
	c.flushing = false
	if c.out != nil { // c.werr is set: nothing more is written
		putBuffer(&outBuffers, c.outBuf, c.out, 2*maxBuffered)
		c.out, c.outBuf = nil, nil
		c.outControl = 0
	}
}

// maxRecord is the most plaintext a TLS record holds: a write of more is
// corked (Listener).
const maxRecord = 16 << 10

// write writes b to the connection. Its write deadline is moved
// WriteByteTimeout ahead only once half of that passed, which keeps the
// deadline's cost off most writes.
func (c *conn) write(b []byte) error {
	timeout := c.srv.writeByteTimeout()
	now := time.Now()
	if c.wdeadline.Sub(now) < timeout/2 {
		c.wdeadline = now.Add(timeout)
		if err := c.nc.SetWriteDeadline(c.wdeadline); err != nil {
			return err
		}
	}
	if c.cork == nil || len(b) <= maxRecord {
		_, err := c.nc.Write(b)
		return err
	}
	c.cork.cork()
	_, err := c.nc.Write(b)
	if uerr := c.cork.uncork(); err == nil {
		err = uerr
	}
	return err
}
