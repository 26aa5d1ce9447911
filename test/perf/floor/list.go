package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// lists answers a list of leases with bodies a leasehold server wrote
// (list.json and list.pb in a directory: `leasehold bench list` asks
// for them whole), gzipped as leasehold does when the client accepts it
// (level 1, its output gathered in 128 KiB) and written in leasehold's
// 256 KiB chunks: what a list costs with no cache, encoding or
// selection, only the transport and the compression. A list with a limit gets the whole list too.
type lists struct{ json, pb []byte }

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
		// The compressor's ~250-byte writes gathered in 128 KiB, as
		// leasehold gathers them.
		bw := bufio.NewWriterSize(w, 128<<10)
		gz, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
		defer bw.Flush()
		defer gz.Close()
		out = gz
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
