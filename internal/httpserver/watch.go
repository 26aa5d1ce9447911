package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/internal/resources"
)

// defaultWatchWriteTimeout bounds each write of a watch stream: a client
// that stops reading is disconnected once a write has waited between half
// of it and all of it, so that a stuck reader holds no server resources.
// A quiet watch is not a stuck one: while it waits for events its
// deadline is pushed forward (see stream).
const defaultWatchWriteTimeout = 60 * time.Second

// watch serves a watch: the registry's watch gives the events filtered
// and encoded; this writes them, flushing each batch, and keeps the
// connection's write deadline.
func (s *Server) watch(w http.ResponseWriter, req *http.Request, res resources.Resource, r *request) error {
	out, err := s.codecs.NegotiateStream(req, target(res, false))
	if err != nil {
		return err
	}
	opts, err := listOptions(r.query)
	if err != nil {
		return err
	}
	opts.Watch = true
	if err := tableOptions(r, out); err != nil {
		return err
	}
	// The watch ends cleanly with the request or with the server.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	defer context.AfterFunc(s.shutdown, cancel)()

	enc := s.codecs.NewWatchEncoder(out, res)
	st := &stream{w: w, rc: http.NewResponseController(w), writeTimeout: s.cfg.WatchWriteTimeout}
	watch, err := s.reg.Watch(ctx, res, r.namespace(), r.name(), opts)
	if err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return err
	}
	st.begin(enc.MediaType())
	if err != nil {
		// kube-apiserver answers a too-old revision inside the stream, so
		// that client-go's reflector recognises it and re-lists.
		frame, eerr := enc.Error(s.errorStatus(req, err))
		if eerr == nil && st.write(frame) == nil {
			_ = st.flush()
		}
		return nil
	}
	defer watch.Stop()
	var events prometheus.Counter
	if s.metrics != nil {
		gvk := res.GroupVersionKind()
		var done func()
		events, done = s.metrics.watchStarted(gvk.Group, gvk.Version, gvk.Kind)
		defer done()
	}
	// While the watch waits for events, its write deadline is kept at
	// least a quarter of a write timeout ahead: only a write that blocks
	// (a client that stopped reading) can reach it.
	watch.SetIdle(st.writeTimeout / 4)
	for {
		frames, err := watch.NextFrames(ctx, enc)
		if err != nil {
			// The watch's end, the client gone, the server stopping, or a
			// watch that fell behind (its client resumes from the last
			// revision it saw): the stream ends cleanly.
			return nil
		}
		if len(frames) == 0 {
			if st.keepDeadline() != nil {
				return nil
			}
			continue
		}
		for _, f := range frames {
			if st.write(f) != nil {
				return nil
			}
		}
		if st.flush() != nil {
			return nil
		}
		if events != nil {
			events.Add(float64(len(frames)))
		}
	}
}

// stream writes one watch response.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// writeTimeout bounds each write (Config.WatchWriteTimeout).
	writeTimeout time.Duration
	// deadline is the write deadline last set; it is pushed forward only
	// when half of it has passed, since setting it on an HTTP/2 stream is
	// a message to the connection's goroutine. On HTTP/2 it is a deadline
	// for the whole stream, not for one write: when it passes the stream
	// is reset even if nothing is being written, so an idle watch must
	// keep it ahead of time.
	deadline time.Time
}

func (st *stream) begin(mediaType string) {
	h := st.w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Transfer-Encoding", "chunked")
	st.w.WriteHeader(http.StatusOK)
	_ = st.rc.Flush()
}

func (st *stream) write(data []byte) error {
	if err := st.keepDeadline(); err != nil {
		return err
	}
	_, err := st.w.Write(data)
	return err
}

// keepDeadline moves the write deadline a write timeout ahead once less
// than half of it is left.
func (st *stream) keepDeadline() error {
	now := time.Now()
	if st.deadline.Sub(now) >= st.writeTimeout/2 {
		return nil
	}
	st.deadline = now.Add(st.writeTimeout)
	if err := st.rc.SetWriteDeadline(st.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (st *stream) flush() error {
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("flushing watch: %w", err)
	}
	return nil
}
