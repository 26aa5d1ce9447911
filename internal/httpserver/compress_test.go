package httpserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/leasehold/leasehold/internal/codec"
)

// writeCounter is a ResponseWriter that keeps the size of every write.
type writeCounter struct {
	*httptest.ResponseRecorder
	writes []int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.ResponseRecorder.Write(p)
}

// TestGzipWritesGathered: a gzipped body reaches the response in writes
// of gzipBuffer, not in the compressor's pieces of a few hundred bytes,
// and decompresses to the body.
func TestGzipWritesGathered(t *testing.T) {
	var body bytes.Buffer
	for i := 0; body.Len() < 8<<20; i++ {
		// Compressible as lists are, not so much that it all fits in one
		// buffer: ~2 MB gzipped.
		fmt.Fprintf(&body, `{"name":"lease-%d","holder":"%x","renew":%d},`, i, i*2654435761, i*7919%100003)
	}
	req := httptest.NewRequest(http.MethodGet, "/apis/coordination.k8s.io/v1/leases", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	w := &writeCounter{ResponseRecorder: httptest.NewRecorder()}
	writeBody(w, req, http.StatusOK, codec.Bytes(body.Bytes()))

	if got := w.Header().Get("Content-Encoding"); got != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", got)
	}
	if len(w.writes) < 2 {
		t.Fatalf("%d writes of %d bytes: want a body larger than one buffer", len(w.writes), w.Body.Len())
	}
	for i, n := range w.writes[:len(w.writes)-1] {
		if n < gzipBuffer {
			t.Fatalf("write %d of %d is %d bytes, want gzipBuffer (%d): %v", i+1, len(w.writes), n, gzipBuffer, w.writes)
		}
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body.Bytes()) {
		t.Fatalf("decompressed %d bytes, not the %d-byte body", len(got), body.Len())
	}
}
