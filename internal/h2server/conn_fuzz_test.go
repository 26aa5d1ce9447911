package h2server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServeConn feeds a connection whatever a client may send after its
// preface, and requires the server to neither panic nor hang: once the
// client is gone the connection and its handlers end.
func FuzzServeConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", string(rune('0'+len(body)%10)))
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("done"))
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		// A client past a bound is held a moment only: the harness
		// checks that the connection ends, not how long it is held.
		srv := &Server{ErrorLog: log.New(io.Discard, "", 0), MaxConcurrentStreams: 4, MaxHeaderBytes: 512, Hold: time.Millisecond}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			newConn(srv, server, &tls.ConnectionState{}, handler, context.Background()).serve()
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = client.Write(append([]byte(http2.ClientPreface), data...))
		if len(data)%2 == 1 {
			// Half the inputs leave the server time to answer, the
			// others end the connection under its handlers.
			time.Sleep(2 * time.Millisecond)
		}
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection outlived its client by 10 s")
		}
	})
}

// fuzzSeeds are frame sequences a client sends: requests with and
// without bodies, a header block over CONTINUATION frames, resets,
// settings, pings, window updates, priorities, a GOAWAY.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	frames := func(write func(fr *http2.Framer, block func(kv ...string) []byte)) []byte {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		block := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i < len(kv); i += 2 {
				_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return bytes.Clone(hb.Bytes())
		}
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
		write(fr, block)
		return buf.Bytes()
	}
	get := []string{":method", "GET", ":path", "/x", ":scheme", "https", ":authority", "a"}
	put := []string{":method", "PUT", ":path", "/x?y=1", ":scheme", "https", ":authority", "a", "content-length", "5"}
	seeds = append(seeds, frames(func(fr *http2.Framer, block func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(get...), EndStream: true, EndHeaders: true})
	}))
	seeds = append(seeds, frames(func(fr *http2.Framer, block func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(put...), EndHeaders: true})
		_ = fr.WriteData(1, false, []byte("he"))
		_ = fr.WriteWindowUpdate(0, 1000)
		_ = fr.WriteData(1, true, []byte("llo"))
		_ = fr.WriteSettingsAck()
		_ = fr.WritePing(false, [8]byte{1})
	}))
	seeds = append(seeds, frames(func(fr *http2.Framer, block func(...string) []byte) {
		b := block(append(get, "x-long", string(bytes.Repeat([]byte("v"), 300)))...)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:10], EndStream: true})
		_ = fr.WriteContinuation(3, false, b[10:20])
		_ = fr.WriteContinuation(3, true, b[20:])
		_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
		_ = fr.WritePriority(5, http2.PriorityParam{StreamDep: 3, Weight: 7})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block(put...), EndHeaders: true})
		_ = fr.WriteWindowUpdate(5, 1<<20)
		_ = fr.WriteGoAway(5, http2.ErrCodeNo, nil)
	}))
	return seeds
}
