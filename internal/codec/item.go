package codec

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/resources"
)

// Item encodings are an object's serialised form without apiVersion and
// kind, as it appears in a list: JSON starting with {"metadata":..., or the
// raw protobuf message of the type. Objects, lists and watch events are
// assembled from them, so that each cached object is encoded once per wire
// format however often it is read.

// Item formats: the memo slot of each wire format whose objects, lists
// and events are assembled from item encodings.
const (
	itemJSON = iota
	itemProtobuf
)

// itemFormat returns the item format of an output and whether it has one
// at all (JSON and protobuf without pretty-printing or a transform).
func itemFormat(out Output) (format int, ok bool) {
	if out.Transform != nil || out.Pretty {
		return 0, false
	}
	switch out.Info.MediaType {
	case JSON:
		return itemJSON, true
	case Protobuf:
		return itemProtobuf, true
	}
	return 0, false
}

// item returns the item encoding of a cached object (storage version) at
// res's version, from the memo when it holds it; else verbatim, or
// encoded.
func (c *Codecs) item(out Output, format int, res resources.Resource, obj Cached) ([]byte, error) {
	return obj.Memo.item(format, res.VersionIndex(), func() ([]byte, error) {
		if it, ok := verbatimFor(format, res).item(obj); ok {
			return it.appendTo(make([]byte, 0, it.size())), nil
		}
		v, err := res.FromStorage(obj.Object())
		if err != nil {
			return nil, err
		}
		return c.EncodeItem(out, v)
	})
}

// protoMarshaler is implemented by every k8s.io/api type.
type protoMarshaler interface {
	Marshal() ([]byte, error)
}

// EncodeItem returns obj's item encoding for out (see itemFormat).
func (c *Codecs) EncodeItem(out Output, obj runtime.Object) ([]byte, error) {
	switch out.Info.MediaType {
	case JSON:
		bare, err := withoutTypeMeta(obj)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(bare)
		if err != nil {
			return nil, err
		}
		return b, nil
	case Protobuf:
		m, ok := obj.(protoMarshaler)
		if !ok {
			return nil, fmt.Errorf("codec: %T has no protobuf encoding", obj)
		}
		return m.Marshal()
	}
	return nil, fmt.Errorf("codec: no item encoding for %s", out.Info.MediaType)
}

// withoutTypeMeta returns obj, or a shallow copy of it with apiVersion and
// kind cleared.
func withoutTypeMeta(obj runtime.Object) (runtime.Object, error) {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		return obj, nil
	}
	out, err := shallowCopy(obj)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, nil
}

// protobufPrefix starts every protobuf-encoded object
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// AppendObject appends a whole object of kind gvk built from its item
// encoding: JSON with apiVersion and kind first, as kube-apiserver writes
// them, or the protobuf envelope.
func AppendObject(dst []byte, out Output, gvk schema.GroupVersionKind, item []byte) []byte {
	if out.Info.MediaType == Protobuf {
		return appendEnvelope(dst, gvk, item)
	}
	dst = appendTypeMetaJSON(dst, gvk)
	if len(item) > 2 { // item is {...}: splice its fields after ours
		dst = append(dst, ',')
		dst = append(dst, item[1:]...)
	} else {
		dst = append(dst, '}')
	}
	return dst
}

func appendTypeMetaJSON(dst []byte, gvk schema.GroupVersionKind) []byte {
	dst = append(dst, `{"kind":`...)
	dst = appendJSONString(dst, gvk.Kind)
	dst = append(dst, `,"apiVersion":`...)
	return appendJSONString(dst, gvk.GroupVersion().String())
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// appendEnvelope appends the protobuf envelope: the prefix, then a
// runtime.Unknown{typeMeta, raw} message (contentEncoding and contentType
// empty).
func appendEnvelope(dst []byte, gvk schema.GroupVersionKind, raw []byte) []byte {
	dst = appendEnvelopeHead(dst, gvk, len(raw))
	return appendEnvelopeTail(append(dst, raw...))
}

// appendEnvelopeHead appends the envelope up to its raw message, which
// must follow, rawLen bytes long, then appendEnvelopeTail.
func appendEnvelopeHead(dst []byte, gvk schema.GroupVersionKind, rawLen int) []byte {
	apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
	typeMetaLen := 1 + uvarintLen(len(apiVersion)) + len(apiVersion) + 1 + uvarintLen(len(kind)) + len(kind)
	dst = append(dst, protobufPrefix...)
	// Unknown.typeMeta = 1
	dst = append(dst, 0x0a)
	dst = binary.AppendUvarint(dst, uint64(typeMetaLen))
	dst = append(dst, 0x0a)
	dst = binary.AppendUvarint(dst, uint64(len(apiVersion)))
	dst = append(dst, apiVersion...)
	dst = append(dst, 0x12)
	dst = binary.AppendUvarint(dst, uint64(len(kind)))
	dst = append(dst, kind...)
	// Unknown.raw = 2
	dst = append(dst, 0x12)
	return binary.AppendUvarint(dst, uint64(rawLen))
}

// appendEnvelopeTail appends Unknown.contentEncoding = 3 and
// Unknown.contentType = 4, both empty.
func appendEnvelopeTail(dst []byte) []byte {
	return append(dst, 0x1a, 0x00, 0x22, 0x00)
}

func uvarintLen(n int) int {
	l := 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		l++
	}
	return l
}

// Body is a response body whose length is known before it is written.
type Body interface {
	Len() int
	io.WriterTo
	// AppendTo appends the body to dst, for what needs it in one buffer
	// (an audit log recording the response).
	AppendTo(dst []byte) []byte
}

// Bytes is a Body in one buffer.
type Bytes []byte

// Len returns the body's size in bytes.
func (b Bytes) Len() int { return len(b) }

// WriteTo writes the body to w.
func (b Bytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// AppendTo appends the body to dst.
func (b Bytes) AppendTo(dst []byte) []byte { return append(dst, b...) }

// ListBody is a list body whose items are item encodings, kept apart: its
// envelope and the items as the cache holds them. WriteTo writes it out in
// chunks rather than assembling one copy of what may be many megabytes
// (a 20,000-lease list is 14 MB of JSON), which costs the zeroing of that
// buffer and its share of a garbage collection on every list.
type ListBody struct {
	// head and tail surround the items.
	head, tail []byte
	items      [][]byte
	// proto frames each item as field 2 of the list message; otherwise
	// the items are comma-separated JSON.
	proto bool
	size  int
}

// NewListBody returns the body of a list of kind gvk (e.g. LeaseList) whose
// items are item encodings, as the standard serializers would write it.
func NewListBody(out Output, gvk schema.GroupVersionKind, lm metav1.ListMeta, items [][]byte) (*ListBody, error) {
	if out.Info.MediaType == Protobuf {
		return newProtoList(gvk, lm, items)
	}
	meta, err := json.Marshal(lm)
	if err != nil {
		return nil, err
	}
	head := appendTypeMetaJSON(make([]byte, 0, 64+len(meta)), gvk)
	head = append(head, `,"metadata":`...)
	head = append(head, meta...)
	head = append(head, `,"items":[`...)
	l := &ListBody{head: head, tail: []byte("]}\n"), items: items}
	l.size = len(l.head) + len(l.tail) + max(len(items)-1, 0)
	for _, it := range items {
		l.size += len(it)
	}
	return l, nil
}

// newProtoList makes the envelope around a list message: ListMeta as
// field 1, each item as field 2, which is the layout of every k8s.io/api
// list type.
func newProtoList(gvk schema.GroupVersionKind, lm metav1.ListMeta, items [][]byte) (*ListBody, error) {
	meta, err := lm.Marshal()
	if err != nil {
		return nil, err
	}
	rawLen := 1 + uvarintLen(len(meta)) + len(meta)
	for _, it := range items {
		rawLen += 1 + uvarintLen(len(it)) + len(it)
	}
	head := appendEnvelopeHead(make([]byte, 0, 64+len(gvk.Kind)+len(gvk.Group)+len(gvk.Version)+len(meta)), gvk, rawLen)
	head = append(head, 0x0a)
	head = binary.AppendUvarint(head, uint64(len(meta)))
	head = append(head, meta...)
	l := &ListBody{head: head, tail: appendEnvelopeTail(nil), items: items, proto: true}
	l.size = len(l.head) + rawLen - (1 + uvarintLen(len(meta)) + len(meta)) + len(l.tail)
	return l, nil
}

// Len returns the body's size in bytes.
func (l *ListBody) Len() int { return l.size }

// AppendTo appends the body to dst.
func (l *ListBody) AppendTo(dst []byte) []byte {
	b := slices.Grow(dst, l.size)
	b = append(b, l.head...)
	for i, it := range l.items {
		b = l.appendSeparator(b, i, it)
		b = append(b, it...)
	}
	return append(b, l.tail...)
}

// appendSeparator appends what goes before item i: a comma between JSON
// items, a field tag and length before a protobuf one.
func (l *ListBody) appendSeparator(b []byte, i int, it []byte) []byte {
	if l.proto {
		b = append(b, 0x12)
		return binary.AppendUvarint(b, uint64(len(it)))
	}
	if i > 0 {
		b = append(b, ',')
	}
	return b
}

// listChunk is the size of the writes of ListBody.WriteTo: large enough that
// a write costs little per byte, small enough to keep in a pool.
const listChunk = 256 << 10

var listChunks = sync.Pool{New: func() any {
	b := make([]byte, 0, listChunk)
	return &b
}}

// WriteTo writes the body to w in chunks of listChunk bytes. w must not
// keep a chunk after its Write returns (io.Writer's contract).
func (l *ListBody) WriteTo(w io.Writer) (int64, error) {
	bp := listChunks.Get().(*[]byte)
	defer listChunks.Put(bp)
	c := (*bp)[:0]
	var n int64
	flush := func() error {
		m, err := w.Write(c)
		n += int64(m)
		c = c[:0]
		return err
	}
	add := func(p []byte) error {
		for len(p) > 0 {
			if len(c) == cap(c) {
				if err := flush(); err != nil {
					return err
				}
			}
			k := copy(c[len(c):cap(c)], p)
			c, p = c[:len(c)+k], p[k:]
		}
		return nil
	}
	if err := add(l.head); err != nil {
		return n, err
	}
	var sep [binary.MaxVarintLen64 + 1]byte
	for i, it := range l.items {
		if err := add(l.appendSeparator(sep[:0], i, it)); err != nil {
			return n, err
		}
		if err := add(it); err != nil {
			return n, err
		}
	}
	if err := add(l.tail); err != nil {
		return n, err
	}
	return n, flush()
}
