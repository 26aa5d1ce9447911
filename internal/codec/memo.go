package codec

import (
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/internal/resources"
)

// memoVersions is how many versions of a kind get memoised encodings; the
// versions after them (no kind has any today) are encoded on every read.
const memoVersions = 2

// Memo keeps the item encodings of one immutable object (see itemFormat):
// one per wire format (JSON, protobuf) and served version, so that an
// object the watch cache holds is encoded once however often it is read.
// The zero Memo is empty and ready.
type Memo struct {
	slots [2 * memoVersions]atomic.Pointer[[]byte]
}

// Cached is an object held by the watch cache with the memo of its
// encodings, or one just written (Obj, with a nil Memo, which memoises
// nothing). The object is of its kind's storage version and shared: nobody
// may modify it.
type Cached struct {
	Obj resources.Object
	// From decodes the object when Obj is nil: the watch cache keeps
	// objects encoded, and a memoised encoding needs no decoding.
	From interface{ Decoded() resources.Object }
	Memo *Memo
}

// VerbatimSource is implemented by a Cached's From that keeps the storage
// encoding its object was decoded from, and its resourceVersion: ok when
// Verbatim holds of them, so that protobuf items of the storage version
// are made from them.
type VerbatimSource interface {
	Verbatim() (stored []byte, rev int64, ok bool)
}

// Object returns the API object.
func (c Cached) Object() resources.Object {
	if c.Obj != nil {
		return c.Obj
	}
	return c.From.Decoded()
}

// decoded returns c with Obj set, for encoders that read the object more
// than once.
func (c Cached) decoded() Cached {
	c.Obj = c.Object()
	return c
}

// slot returns the memo slot of an item encoding; ok is false when it is
// not memoised.
func (m *Memo) slot(format, version int) (*atomic.Pointer[[]byte], bool) {
	if m == nil || version >= memoVersions {
		return nil, false
	}
	return &m.slots[version*2+format], true
}

// item returns the memoised bytes, computing them with encode on first
// use. Concurrent first uses may both encode; either result is kept. The
// bytes must not be modified.
func (m *Memo) item(format, version int, encode func() ([]byte, error)) ([]byte, error) {
	p, ok := m.slot(format, version)
	if !ok {
		return encode()
	}
	if b := p.Load(); b != nil {
		return *b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	p.Store(&b)
	return b, nil
}

// EventMemo keeps the encoded frames of one watch event, one per output,
// version and event type, so that an event is encoded once however many
// watchers receive it. The zero EventMemo is empty and ready.
type EventMemo struct {
	mu sync.Mutex // guards m
	m  map[eventKey][]byte
}

type eventKey struct {
	mediaType string
	version   int
	typ       string
}

// frame returns the memoised frame, computing it with encode on first
// use. Concurrent callers with the same key wait for the first one.
func (e *EventMemo) frame(key eventKey, encode func() ([]byte, error)) ([]byte, error) {
	if e == nil {
		return encode()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.m[key]; ok {
		return b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	if e.m == nil {
		e.m = make(map[eventKey][]byte, 2)
	}
	e.m[key] = b
	return b, nil
}
