package codec

import (
	"bytes"
	"encoding/binary"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/resources"
)

// WatchEncoder frames the events of one watch stream of a resource in the
// negotiated output: for JSON a line {"type":...,"object":...}; for
// protobuf a 4-byte big-endian length and a metav1.WatchEvent whose object
// is in the protobuf envelope. A Table watch sends its column definitions
// once, with the first event. A WatchEncoder is used by one goroutine.
type WatchEncoder struct {
	c           *Codecs
	out         Output
	res         resources.Resource
	sentHeaders bool
}

// NewWatchEncoder returns the encoder of a watch stream.
func (c *Codecs) NewWatchEncoder(out Output, res resources.Resource) *WatchEncoder {
	return &WatchEncoder{c: c, out: out, res: res}
}

// MediaType is the Content-Type of the stream.
func (e *WatchEncoder) MediaType() string {
	if e.out.Info.MediaType == JSON {
		return JSON
	}
	return e.out.Info.MediaType + ";stream=watch"
}

// Event returns the frame of one event whose object (storage version) is
// obj. memo, shared by every watcher of the same cache event, keeps the
// frame so that the event is encoded once per output; nil memoises
// nothing.
func (e *WatchEncoder) Event(typ watch.EventType, obj Cached, memo *EventMemo) ([]byte, error) {
	if t := e.out.Transform; t != nil && t.Kind == "Table" {
		return e.tableEvent(typ, obj)
	}
	key := eventKey{mediaType: e.out.MediaType(), version: e.res.VersionIndex(), typ: string(typ)}
	return memo.frame(key, func() ([]byte, error) {
		if format, ok := itemFormat(e.out); ok {
			item, err := e.c.item(e.out, format, e.res, obj)
			if err != nil {
				return nil, err
			}
			return e.frame(string(typ), AppendObject(nil, e.out, e.res.GroupVersionKind(), item))
		}
		if t := e.out.Transform; t != nil && t.Kind == "PartialObjectMetadata" {
			return e.encodeEvent(string(typ), partial(obj.Object(), t))
		}
		v, err := e.res.FromStorage(obj.Object())
		if err != nil {
			return nil, err
		}
		return e.encodeEvent(string(typ), v)
	})
}

func (e *WatchEncoder) tableEvent(typ watch.EventType, obj Cached) ([]byte, error) {
	obj = obj.decoded()
	table, err := e.c.table(e.res, e.out.Transform, []Cached{obj}, metav1.ListMeta{ResourceVersion: obj.Object().GetResourceVersion()})
	if err != nil {
		return nil, err
	}
	if e.sentHeaders {
		table.ColumnDefinitions = nil
	}
	e.sentHeaders = true
	return e.encodeEvent(string(typ), table)
}

// Bookmark returns a BOOKMARK: an empty object of the kind carrying only
// the revision, and, ending a streaming list (initialEnd), the
// k8s.io/initial-events-end annotation.
func (e *WatchEncoder) Bookmark(rev int64, initialEnd bool) ([]byte, error) {
	obj := e.res.New()
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		obj.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	var o runtime.Object = obj
	if t := e.out.Transform; t != nil && t.Kind != "Table" {
		o = partial(obj, t)
	}
	return e.encodeEvent(string(watch.Bookmark), o)
}

// Error returns the ERROR event that ends a stream with status.
func (e *WatchEncoder) Error(status *metav1.Status) ([]byte, error) {
	return e.encodeEvent(string(watch.Error), status)
}

// encodeEvent returns one framed event of obj, encoded in full.
func (e *WatchEncoder) encodeEvent(eventType string, obj runtime.Object) ([]byte, error) {
	var objBuf bytes.Buffer
	if err := e.c.Encode(&objBuf, Output{Info: e.out.Info}, obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return e.frame(eventType, bytes.TrimRight(objBuf.Bytes(), "\n"))
}

// frame frames an encoded object as one watch event.
func (e *WatchEncoder) frame(eventType string, object []byte) ([]byte, error) {
	if e.out.Info.MediaType == Protobuf {
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
	out := make([]byte, 0, len(object)+32)
	out = append(out, `{"type":`...)
	out = strconv.AppendQuote(out, eventType)
	out = append(out, `,"object":`...)
	out = append(out, object...)
	out = append(out, "}\n"...)
	return out, nil
}
