package hostile

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// Options say how hard an attack pushes.
type Options struct {
	// Conns is the number of attacking connections; 0 means 1.
	Conns int
	// Duration is how long each connection attacks once set up.
	Duration time.Duration
	// AtEnd, when set, is called once every connection is done
	// attacking, before they close: to measure what they still hold.
	AtEnd func()
}

func (o Options) conns() int { return max(o.Conns, 1) }

// Report is what an attack did and what the server did about it.
type Report struct {
	Attack string
	Conns  []ConnResult
}

// ConnResult is one attacking connection's story.
type ConnResult struct {
	// Err is why the attack could not start on this connection (a dial,
	// or an answer to the setup request other than 200).
	Err error
	// Closed is when the server closed the connection (an error writing
	// or reading it), since the attack began on it; 0 when it did not.
	Closed time.Duration
	// How is how it was closed: "GOAWAY <code>" when a GOAWAY was read,
	// else "EOF" or "reset".
	How string
	// Frames and Bytes are what the client sent (plaintext, the preface
	// and the setup included).
	Frames, Bytes int64
	// Streams is the streams opened.
	Streams int
	// Resets counts the RST_STREAM frames received, by code.
	Resets map[http2.ErrCode]int
	// FirstReset is when the first RST_STREAM came, since the attack
	// began on the connection.
	FirstReset time.Duration
	// Statuses counts the answers received, by :status.
	Statuses map[int]int
	// MaxStreams is the server's SETTINGS_MAX_CONCURRENT_STREAMS (0 when
	// it sent none).
	MaxStreams uint32
	// Note is what else is worth knowing (such as the answer a setup
	// stream got).
	Note string
}

// Err is the first connection's setup error, if any.
func (r Report) Err() error {
	for _, c := range r.Conns {
		if c.Err != nil {
			return c.Err
		}
	}
	return nil
}

// Closed counts the connections the server closed.
func (r Report) Closed() int {
	n := 0
	for _, c := range r.Conns {
		if c.Closed > 0 {
			n++
		}
	}
	return n
}

// Resets counts the RST_STREAM frames of every connection, by code.
func (r Report) Resets() map[http2.ErrCode]int {
	m := map[http2.ErrCode]int{}
	for _, c := range r.Conns {
		for code, n := range c.Resets {
			m[code] += n
		}
	}
	return m
}

// Statuses counts the answers of every connection, by :status.
func (r Report) Statuses() map[int]int {
	m := map[int]int{}
	for _, c := range r.Conns {
		for s, n := range c.Statuses {
			m[s] += n
		}
	}
	return m
}

// ClosedSummary is "closed/total how" ("4/4 GOAWAY ENHANCE_YOUR_CALM",
// "0/4 open"), the ways of closing in order of frequency.
func (r Report) ClosedSummary() string {
	hows := map[string]int{}
	for _, c := range r.Conns {
		switch {
		case c.Err != nil:
			hows["failed"]++
		case c.Closed > 0:
			hows[c.How]++
		}
	}
	ways := slices.SortedFunc(maps.Keys(hows), func(a, b string) int { return hows[b] - hows[a] })
	if len(ways) == 0 {
		return fmt.Sprintf("0/%d open", len(r.Conns))
	}
	var parts []string
	for _, w := range ways {
		if len(ways) > 1 {
			w = fmt.Sprintf("%d %s", hows[w], w)
		}
		parts = append(parts, w)
	}
	return fmt.Sprintf("%d/%d %s", r.Closed(), len(r.Conns), strings.Join(parts, ", "))
}

// CloseTimes is the range of the closed connections' times to close
// ("-" when none closed).
func (r Report) CloseTimes() string {
	var ts []time.Duration
	for _, c := range r.Conns {
		if c.Closed > 0 {
			ts = append(ts, c.Closed)
		}
	}
	if len(ts) == 0 {
		return "-"
	}
	lo, hi := slices.Min(ts), slices.Max(ts)
	if hi-lo < 10*time.Millisecond {
		return round(hi).String()
	}
	return round(lo).String() + "–" + round(hi).String()
}

// Detail is what was sent and what came back, in a few words.
func (r Report) Detail() string {
	var frames, bytes int64
	streams := 0
	var first time.Duration
	for _, c := range r.Conns {
		frames += c.Frames
		bytes += c.Bytes
		streams += c.Streams
		if c.FirstReset > 0 && (first == 0 || c.FirstReset < first) {
			first = c.FirstReset
		}
	}
	parts := []string{fmt.Sprintf("sent %d frames, %s", frames, Bytes(bytes))}
	if streams > 0 {
		parts = append(parts, fmt.Sprintf("%d streams", streams))
	}
	if rs := r.Resets(); len(rs) > 0 {
		var s []string
		for _, code := range slices.Sorted(maps.Keys(rs)) {
			s = append(s, fmt.Sprintf("%d %v", rs[code], code))
		}
		parts = append(parts, "RST_STREAM "+strings.Join(s, ", ")+" (first after "+round(first).String()+")")
	}
	if st := r.Statuses(); len(st) > 0 {
		var s []string
		for _, code := range slices.Sorted(maps.Keys(st)) {
			s = append(s, fmt.Sprintf("%d×%d", st[code], code))
		}
		parts = append(parts, "answers "+strings.Join(s, ", "))
	}
	if err := r.Err(); err != nil {
		parts = append(parts, "setup failed: "+err.Error())
	}
	for _, c := range r.Conns {
		if c.Note != "" {
			parts = append(parts, c.Note)
			break
		}
	}
	return strings.Join(parts, "; ")
}

func (r Report) String() string {
	return fmt.Sprintf("%s: closed %s after %s; %s", r.Attack, r.ClosedSummary(), r.CloseTimes(), r.Detail())
}

// Bytes formats n in KiB, MiB or GiB.
func Bytes(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

// closedHow names the way a read or write error says the connection
// went: "EOF", "reset", or the error itself.
func closedHow(err error) string {
	var opErr *net.OpError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.As(err, &opErr):
		return opErr.Err.Error()
	}
	return err.Error()
}

// isTimeout: the error of a deadline (ours), not of the server.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
