package httpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/internal/resources"
)

// defaultWatchWriteTimeout bounds each write of a watch stream: a client
// that stops reading is disconnected once a write has waited this long
// (stallGuard). A quiet watch is not a stuck one: between writes nothing
// is bounded.
const defaultWatchWriteTimeout = 60 * time.Second

// watch serves a watch: the registry's watch gives the events filtered
// and encoded; this writes them, flushing each batch, each write under a
// stall guard.
func (s *Server) watch(w http.ResponseWriter, req *http.Request, res resources.Resource, call *request) error {
	out, err := s.codecs.NegotiateStream(req, target(res, false))
	if err != nil {
		return err
	}
	opts, err := listOptions(call.query)
	if err != nil {
		return err
	}
	opts.Watch = true
	if err := tableOptions(call, out); err != nil {
		return err
	}
	// The watch ends cleanly with the request or with the server.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	defer context.AfterFunc(s.shutdown, cancel)()

	enc := s.codecs.NewWatchEncoder(out, res)
	guard := &stallGuard{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WatchWriteTimeout}
	defer guard.close()
	watch, err := s.reg.Watch(ctx, res, call.namespace(), call.name(), opts)
	if err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", enc.MediaType())
	h.Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if err != nil {
		// kube-apiserver answers a too-old revision inside the stream, so
		// that client-go's reflector recognises it and re-lists.
		if frame, eerr := enc.Error(s.errorStatus(req, err)); eerr == nil {
			_ = guard.send(frame)
		}
		return nil
	}
	_ = guard.send()
	defer watch.Stop()
	var events prometheus.Counter
	if s.metrics != nil {
		gvk := res.GroupVersionKind()
		var done func()
		events, done = s.metrics.watchStarted(gvk.Group, gvk.Version, gvk.Kind)
		defer done()
	}
	for {
		frames, err := watch.NextFrames(ctx, enc)
		if err != nil {
			// The watch's end, the client gone, the server stopping, or a
			// watch that fell behind (its client resumes from the last
			// revision it saw): the stream ends cleanly.
			return nil
		}
		if guard.send(frames...) != nil {
			return nil
		}
		if events != nil {
			events.Add(float64(len(frames)))
		}
	}
}
