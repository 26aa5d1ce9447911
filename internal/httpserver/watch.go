package httpserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/watchcache"
)

// initialEventsEndAnnotation marks the bookmark that ends a streaming
// list (metav1.InitialEventsAnnotationKey).
const initialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

// defaultWatchWriteTimeout bounds each write of a watch stream: a client
// that stops reading is disconnected once a write has waited between half
// of it and all of it, so that a stuck reader holds no server resources.
// A quiet watch is not a stuck one: while it waits for events its
// deadline is pushed forward (see stream.run).
const defaultWatchWriteTimeout = 60 * time.Second

func (s *Server) watch(w http.ResponseWriter, req *http.Request, res *resources.Resource, info requestInfo) error {
	out, err := s.codecs.NegotiateStream(req, codec.Target{Transforms: true})
	if err != nil {
		return err
	}
	opts, err := listOptions(req)
	if err != nil {
		return err
	}
	opts.Watch = true
	var tableOpts metav1.TableOptions
	if out.Transform != nil && out.Transform.Kind == "Table" {
		if tableOpts, err = tableOptions(req); err != nil {
			return err
		}
	}
	timeout := s.cfg.MinWatchTimeout + time.Duration(rand.Int64N(int64(s.cfg.MinWatchTimeout)))
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	start, err := s.reg.Watch(req.Context(), res, info.namespace, info.name, opts)
	if err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return err
	}

	st := &stream{
		s: s, w: w, req: req, out: out, res: res,
		rc:           http.NewResponseController(w),
		tableOpts:    tableOpts,
		writeTimeout: s.cfg.WatchWriteTimeout,
	}
	st.begin()
	if err != nil {
		// kube-apiserver answers a too-old revision inside the stream, so
		// that client-go's reflector recognises it and re-lists.
		_ = st.writeError(err)
		return nil
	}
	st.run(start, opts.AllowWatchBookmarks, time.Now().Add(timeout))
	return nil
}

// stream writes one watch response.
type stream struct {
	s         *Server
	w         http.ResponseWriter
	rc        *http.ResponseController
	req       *http.Request
	out       codec.Output
	res       *resources.Resource
	tableOpts metav1.TableOptions
	// sentHeaders: a Table watch sends column definitions once.
	sentHeaders bool
	// writeTimeout bounds each write (Config.WatchWriteTimeout).
	writeTimeout time.Duration
	// deadline is the write deadline last set; it is pushed forward only
	// when half of it has passed, since setting it on an HTTP/2 stream is
	// a message to the connection's goroutine. On HTTP/2 it is a deadline
	// for the whole stream, not for one write: when it passes the stream
	// is reset even if nothing is being written, so an idle watch must
	// keep it ahead of time (see run).
	deadline time.Time
}

func (st *stream) begin() {
	mediaType := st.out.Info.MediaType
	if mediaType != codec.JSON {
		mediaType += ";stream=watch"
	}
	h := st.w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Transfer-Encoding", "chunked")
	st.w.WriteHeader(http.StatusOK)
	_ = st.rc.Flush()
}

func (st *stream) run(start *registry.WatchStart, bookmarks bool, deadline time.Time) {
	ctx := st.req.Context()
	if start.Initial != nil {
		if err := st.sendInitial(start); err != nil {
			return
		}
		if start.InitialEventsEnd && bookmarks {
			if err := st.sendBookmark(start.Initial.Rev, true); err != nil {
				return
			}
		}
		if err := st.flush(); err != nil {
			return
		}
	}
	deadlineTimer := time.NewTimer(time.Until(deadline))
	defer deadlineTimer.Stop()
	var bookmarkTimer *time.Timer
	var bookmarkC <-chan time.Time
	if bookmarks {
		bookmarkTimer = time.NewTimer(st.nextBookmark(deadline))
		defer bookmarkTimer.Stop()
		bookmarkC = bookmarkTimer.C
	}
	// While the watch waits for events, its write deadline is kept at
	// least a quarter of a write timeout ahead: only a write that blocks
	// (a client that stopped reading) can reach it.
	idle := time.NewTimer(st.writeTimeout / 4)
	defer idle.Stop()
	batch := make([]watchcache.Event, 0, 256)
	var caughtUp int64
	for {
		events, rev, wake, err := start.Cursor.Read(batch[:0])
		if err != nil {
			// Fell behind: end the stream; the client resumes from the
			// last revision it saw.
			return
		}
		for i := range events {
			ev, ok := watchcache.Filter(&events[i], start.Selector)
			if !ok {
				continue
			}
			if err := st.sendEvent(&ev); err != nil {
				return
			}
		}
		caughtUp = rev
		if len(events) > 0 {
			if err := st.flush(); err != nil {
				return
			}
			if len(events) == cap(batch) {
				continue
			}
		}
		select {
		case <-wake:
		case <-idle.C:
			if err := st.keepDeadline(); err != nil {
				return
			}
			idle.Reset(st.writeTimeout / 4)
		case <-bookmarkC:
			if err := st.sendBookmark(caughtUp, false); err != nil {
				return
			}
			if err := st.flush(); err != nil {
				return
			}
			bookmarkTimer.Reset(st.nextBookmark(deadline))
		case <-deadlineTimer.C:
			return
		case <-ctx.Done():
			return
		case <-st.s.shutdown:
			return
		}
	}
}

// bookmarkInterval is how often a watch with allowWatchBookmarks gets a
// bookmark, as kube-apiserver sends them (about once a minute).
const bookmarkInterval = time.Minute

// nextBookmark returns when to send the next bookmark: a minute from now,
// or just before the watch ends so the client learns the latest revision.
func (st *stream) nextBookmark(deadline time.Time) time.Duration {
	interval := bookmarkInterval
	if st.s.cfg.BookmarkInterval > 0 {
		interval = st.s.cfg.BookmarkInterval
	}
	d := interval
	if untilEnd := time.Until(deadline) - 2*time.Second; untilEnd > 0 && untilEnd < d {
		d = untilEnd
	}
	return d
}

func (st *stream) sendInitial(start *registry.WatchStart) error {
	from := ""
	for {
		page := start.Initial.List(start.Selector, from, 256)
		for _, o := range page.Objects {
			ev := watchcache.Event{Type: watch.Added, Object: o, Rev: o.Rev}
			if err := st.sendEvent(&ev); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		if err := st.flush(); err != nil {
			return err
		}
		from = page.Next
	}
}

func (st *stream) sendEvent(ev *watchcache.Event) error {
	if st.out.Transform != nil && st.out.Transform.Kind == "Table" {
		data, err := st.encodeTableEvent(ev)
		if err != nil {
			return err
		}
		return st.write(data)
	}
	key := st.out.MediaType() + "|" + string(ev.Type)
	data, err := ev.Encoded(key, func() ([]byte, error) {
		if slot, ok := codec.ItemSlot(st.out); ok {
			o := ev.Object
			item, err := o.Memo(slot, func() ([]byte, error) { return st.s.codecs.EncodeItem(st.out, o.Obj) })
			if err != nil {
				return nil, err
			}
			return st.frameEvent(string(ev.Type), codec.AppendObject(nil, st.out, st.res.GroupVersionKind(), item))
		}
		return st.encodeEvent(string(ev.Type), st.transformed(ev.Object.Obj))
	})
	if err != nil {
		return err
	}
	return st.write(data)
}

func (st *stream) transformed(obj resources.Object) runtime.Object {
	if t := st.out.Transform; t != nil && t.Kind == "PartialObjectMetadata" {
		return partial(obj, t)
	}
	return obj
}

func (st *stream) encodeTableEvent(ev *watchcache.Event) ([]byte, error) {
	table, err := st.s.buildTable(st.res, st.out.Transform, st.tableOpts, []resources.Object{ev.Object.Obj}, metav1.ListMeta{ResourceVersion: strconv.FormatInt(ev.Rev, 10)})
	if err != nil {
		return nil, err
	}
	if st.sentHeaders {
		table.ColumnDefinitions = nil
	}
	st.sentHeaders = true
	return st.encodeEvent(string(ev.Type), table)
}

// sendBookmark sends a BOOKMARK: an empty object of the kind carrying only
// the revision (and, ending a streaming list, the initial-events-end
// annotation).
func (st *stream) sendBookmark(rev int64, initialEnd bool) error {
	obj := st.res.New()
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		obj.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
	}
	var o runtime.Object = obj
	if t := st.out.Transform; t != nil && t.Kind != "Table" {
		o = st.transformed(obj)
	}
	data, err := st.encodeEvent(string(watch.Bookmark), o)
	if err != nil {
		return err
	}
	return st.write(data)
}

func (st *stream) writeError(err error) error {
	status := st.s.errorStatus(st.req, err)
	data, eerr := st.encodeEvent(string(watch.Error), status)
	if eerr != nil {
		return eerr
	}
	if err := st.write(data); err != nil {
		return err
	}
	return st.flush()
}

// encodeEvent returns one framed watch event: for JSON a line
// {"type":...,"object":...}; for protobuf a 4-byte big-endian length and a
// metav1.WatchEvent whose object is in the protobuf envelope.
func (st *stream) encodeEvent(eventType string, obj runtime.Object) ([]byte, error) {
	var objBuf bytes.Buffer
	objOut := codec.Output{Info: st.out.Info}
	if err := st.s.codecs.Encode(&objBuf, objOut, obj); err != nil {
		return nil, err
	}
	return st.frameEvent(eventType, bytes.TrimRight(objBuf.Bytes(), "\n"))
}

// frameEvent frames an encoded object as one watch event.
func (st *stream) frameEvent(eventType string, object []byte) ([]byte, error) {
	if st.out.Info.MediaType == codec.Protobuf {
		ev := metav1.WatchEvent{Type: eventType, Object: runtime.RawExtension{Raw: object}}
		data, err := ev.Marshal()
		if err != nil {
			return nil, err
		}
		framed := make([]byte, 4+len(data))
		binary.BigEndian.PutUint32(framed, uint32(len(data)))
		copy(framed[4:], data)
		return framed, nil
	}
	raw := object
	out := make([]byte, 0, len(raw)+32)
	out = append(out, `{"type":`...)
	out = strconv.AppendQuote(out, eventType)
	out = append(out, `,"object":`...)
	out = append(out, raw...)
	out = append(out, "}\n"...)
	return out, nil
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
