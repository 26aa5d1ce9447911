package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// lists answers a list of leases with bodies a leasehold server wrote
// (list.json and list.pb in a directory: `leasehold bench list` asks
// for them whole), gzipped as leasehold does when the client accepts it
// (level 1, the writers pooled, their output gathered in 128 KiB) and
// written in leasehold's 256 KiB chunks: what a list costs with no
// cache, encoding or selection, only the transport and the compression.
// A list with a limit gets the whole list too.
type lists struct{ json, pb []byte }

// gzipWriters are kept as leasehold keeps them: pooled, the compressor's
// ~250-byte writes gathered in 128 KiB.
var gzipWriters = sync.Pool{New: func() any {
	gw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return &gzipWriter{gw: gw, bw: bufio.NewWriterSize(nil, 128<<10)}
}}

type gzipWriter struct {
	gw *gzip.Writer
	bw *bufio.Writer
}

func loadLists(dir string) (*lists, error) {
	j, err := os.ReadFile(filepath.Join(dir, "list.json"))
	if err != nil {
		return nil, err
	}
	p, err := os.ReadFile(filepath.Join(dir, "list.pb"))
	if err != nil {
		return nil, err
	}
	return &lists{json: j, pb: p}, nil
}

func (l *lists) serve(w http.ResponseWriter, r *http.Request) {
	body, ct := l.json, "application/json"
	if strings.HasPrefix(r.Header.Get("Accept"), protobuf) {
		body, ct = l.pb, protobuf
	}
	w.Header().Set("Content-Type", ct)
	out := io.Writer(w)
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		z := gzipWriters.Get().(*gzipWriter)
		z.bw.Reset(w)
		z.gw.Reset(z.bw)
		defer func() {
			if z.gw.Close() == nil {
				_ = z.bw.Flush()
			}
			z.gw.Reset(nil)
			z.bw.Reset(nil)
			gzipWriters.Put(z)
		}()
		out = z.gw
	}
	const chunk = 256 << 10
	for len(body) > 0 {
		n := min(chunk, len(body))
		if _, err := out.Write(body[:n]); err != nil {
			return
		}
		body = body[n:]
	}
}
