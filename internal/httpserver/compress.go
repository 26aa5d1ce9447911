package httpserver

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/leasehold/leasehold/internal/codec"
)

// gzipThreshold is kube-apiserver's: bodies up to 128 KiB go out as they
// are, where compressing costs more than it saves.
const gzipThreshold = 128 * 1024

// gzipWriters hold writers at level 1 (BestSpeed), kube-apiserver's
// choice: most of the saving of higher levels at a fraction of the CPU.
// klauspost/compress's writer (the standard library's API) compresses a
// 20,000-lease list 2.4x faster than compress/gzip at that level (8.8
// against 21.6 ms for the 14 MB JSON list, 7.6 against 18.7 ms for the
// 8 MB protobuf one), to bodies of about the same size (1.01 against
// 1.12 MB, 0.95 against 0.93 MB).
//
// The compressor writes its output ~250 bytes at a time; gathered into
// gzipBuffer's worth before each write to the connection, a 1 MB body is
// eight writes, not some 4,000 (each a pass through the response's
// buffer, and a system call every 16 KiB).
var gzipWriters = sync.Pool{New: func() any {
	gw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return &gzipWriter{gw: gw, bw: bufio.NewWriterSize(nil, gzipBuffer)}
}}

const gzipBuffer = 128 << 10

type gzipWriter struct {
	gw *gzip.Writer
	bw *bufio.Writer
}

// writeBody writes a complete response body with the status code; the
// caller has set Content-Type. Like kube-apiserver (APIResponseCompression,
// on by default) it gzips a body over gzipThreshold when the client accepts
// gzip, which Go clients, client-go and kubectl included, do unless told
// not to. Watch streams are never compressed. (Generic so that a body in
// one buffer is not boxed into a Body: an allocation of every answer.)
func writeBody[B codec.Body](w http.ResponseWriter, req *http.Request, code int, body B) {
	h := w.Header()
	if body.Len() <= gzipThreshold || !acceptsGzip(req) {
		h.Set("Content-Length", strconv.Itoa(body.Len()))
		w.WriteHeader(code)
		if req.Method != http.MethodHead {
			_, _ = body.WriteTo(w)
		}
		return
	}
	h.Del("Content-Length")
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	w.WriteHeader(code)
	if req.Method == http.MethodHead {
		return
	}
	z := gzipWriters.Get().(*gzipWriter)
	z.bw.Reset(w)
	z.gw.Reset(z.bw)
	// A write error is the client gone; there is no one to tell.
	if _, err := body.WriteTo(z.gw); err == nil && z.gw.Close() == nil {
		_ = z.bw.Flush()
	}
	z.gw.Reset(nil)
	z.bw.Reset(nil)
	gzipWriters.Put(z)
}

// acceptsGzip reports whether Accept-Encoding lists gzip, read as
// kube-apiserver reads it: the first header line's comma-separated
// tokens, parameters (q-values) not considered.
func acceptsGzip(req *http.Request) bool {
	for token := range strings.SplitSeq(req.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(token) == "gzip" {
			return true
		}
	}
	return false
}
