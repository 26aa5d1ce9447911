package httpserver

import (
	"bufio"
	"context"
	"io"
	"net/http"
)

// SnapshotPath is where a snapshot of the store is served (GET). It is a
// non-resource URL: besides system:masters, only users granted the get
// verb on it (an RBAC rule with nonResourceURLs: ["/snapshot"]) may read
// it, as kube-apiserver guards /metrics or /debug; a snapshot holds every
// object of every namespace.
const SnapshotPath = "/snapshot"

// snapshotBuffer is how much of a snapshot is written at once, each write
// under the stall guard.
const snapshotBuffer = 256 << 10

// serveSnapshot streams the store's snapshot. An error before its first
// byte is answered as any error; after it, the connection is broken, so
// that the client sees a failed transfer (the file's missing checksum
// would tell it too).
func (s *Server) serveSnapshot(w http.ResponseWriter, req *http.Request) error {
	if req.Method != http.MethodGet {
		return methodNotAllowed()
	}
	// The snapshot ends with the request or with the server.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	defer context.AfterFunc(s.shutdown, cancel)()
	guard := &stallGuard{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WatchWriteTimeout}
	defer guard.close()
	sw := &snapshotWriter{w: w, guard: guard}
	buf := bufio.NewWriterSize(sw, snapshotBuffer)
	err := s.cfg.Snapshot(ctx, buf)
	if err == nil {
		err = buf.Flush()
	}
	if err == nil && !sw.started {
		sw.start() // an empty snapshot: not one this server writes
	}
	if err != nil && sw.started {
		s.log.Warn("snapshot ended before it was complete", "err", err)
		panic(http.ErrAbortHandler)
	}
	return err
}

// snapshotWriter writes a snapshot's bytes as the answer, its header
// with the first of them.
type snapshotWriter struct {
	w       http.ResponseWriter
	guard   *stallGuard
	started bool
}

func (sw *snapshotWriter) start() {
	sw.started = true
	h := sw.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	sw.w.WriteHeader(http.StatusOK)
}

func (sw *snapshotWriter) Write(p []byte) (int, error) {
	if !sw.started {
		sw.start()
	}
	if err := sw.guard.send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = (*snapshotWriter)(nil)
