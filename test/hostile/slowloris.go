package hostile

import (
	"bytes"
	"context"
	"time"

	"golang.org/x/net/http2"
)

// slowlorisInterval is the time between the bytes a slowloris sends:
// its preface alone (24 bytes) takes longer than the 10 s Go's server
// and leasehold's allow for it.
const slowlorisInterval = time.Second

// Slowloris completes the TLS handshake, then sends its connection
// preface, SETTINGS and a request's HEADERS one byte at a time, holding
// the connection. A server that bounds the wait for a preface closes it.
func Slowloris(ctx context.Context, tg Target, o Options) Report {
	return run(ctx, tg, o, "slowloris", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		c.silent = true
		var msg bytes.Buffer
		msg.WriteString(http2.ClientPreface)
		fr := http2.NewFramer(&msg, nil)
		if err := fr.WriteSettings(); err != nil {
			return err
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{
			StreamID: 1, BlockFragment: c.headerBlock("GET", c.tg.SmallPath), EndStream: true, EndHeaders: true,
		}); err != nil {
			return err
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		c.goRead(nil)
		tick := time.NewTicker(slowlorisInterval)
		defer tick.Stop()
		deadline := time.NewTimer(time.Until(end))
		defer deadline.Stop()
		for _, b := range msg.Bytes() {
			if _, err := c.nc.Write([]byte{b}); err != nil {
				c.serverClosed(err)
				return nil
			}
			c.cw.bytes.Add(1)
			select {
			case <-tick.C:
			case <-c.closed:
				return nil
			case <-ctx.Done():
				return nil
			case <-deadline.C:
				return nil
			}
		}
		c.wait(ctx, end)
		return nil
	})
}
