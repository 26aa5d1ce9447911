package h2server

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A request's header block is decoded here rather than by the Framer
// (its ReadMetaHeaders): the Framer gives every block a new field slice,
// grown field by field (1.3 KB a request), where a connection can reuse
// one. The checks are the Framer's, field by field (RFC 9113, 8.2 and
// 8.3): names in lower case and of token characters, values without
// forbidden bytes, pseudo-fields first, known and not repeated, and the
// list within MAX_HEADER_LIST_SIZE (past it the request is answered 431).

// headerBlockReader gathers the frames of one header block. The serve
// goroutine's own.
type headerBlockReader struct {
	hdec *hpack.Decoder
	// The block being decoded.
	fields    []hpack.HeaderField
	remaining uint32
	truncated bool
	invalid   error
	regular   bool // a regular field was seen

	// A block split over CONTINUATION frames, while it is incomplete: its
	// fragments are decoded as they come (not kept), wire counts them.
	stream    uint32
	endStream bool
	priority  http2.PriorityParam
	prio      bool
	wire      int
}

// decodedHeaders are a header block's fields, valid until the next block
// is decoded.
type decodedHeaders struct {
	stream    uint32
	endStream bool
	fields    []hpack.HeaderField
	// size is the fields' size as HTTP/2 counts it.
	size      int
	truncated bool
	priority  http2.PriorityParam
	prio      bool
}

func (h *headerBlockReader) init() {
	h.hdec = hpack.NewDecoder(4096, nil)
	h.hdec.SetEmitFunc(h.emit)
}

var (
	errPseudoAfterRegular = errors.New("pseudo-header field after a regular one")
	errBadFieldName       = errors.New("invalid header field name")
	errBadFieldValue      = errors.New("invalid header field value")
)

func (h *headerBlockReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		h.invalid = errBadFieldValue
	} else if hf.IsPseudo() {
		if h.regular {
			h.invalid = errPseudoAfterRegular
		}
	} else {
		h.regular = true
		if !validFieldName(hf.Name) {
			h.invalid = errBadFieldName
		}
	}
	if h.invalid != nil {
		h.hdec.SetEmitEnabled(false)
		return
	}
	if size := hf.Size(); size > h.remaining {
		h.hdec.SetEmitEnabled(false)
		h.truncated = true
		h.remaining = 0
		return
	} else {
		h.remaining -= size
	}
	h.fields = append(h.fields, hf)
}

// validFieldName: lower case token characters (RFC 9113, 8.2.1).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		b := s[i]
		if !httpguts.IsTokenRune(rune(b)) || 'A' <= b && b <= 'Z' {
			return false
		}
	}
	return true
}

// headers takes a HEADERS frame: ok when it completes a block, which out
// then holds.
func (h *headerBlockReader) headers(f *http2.HeadersFrame, limit uint32, out *decodedHeaders) (bool, error) {
	h.stream, h.endStream, h.priority, h.prio = f.StreamID, f.StreamEnded(), f.Priority, f.HasPriority()
	h.begin(limit)
	if err := h.fragment(f.HeaderBlockFragment(), limit); err != nil {
		return false, err
	}
	if !f.HeadersEnded() {
		return false, nil
	}
	return true, h.end(limit, out)
}

// continuation takes a CONTINUATION frame (the Framer checked that it
// follows the HEADERS frame of its stream).
func (h *headerBlockReader) continuation(f *http2.ContinuationFrame, limit uint32, out *decodedHeaders) (bool, error) {
	if err := h.fragment(f.HeaderBlockFragment(), limit); err != nil {
		return false, err
	}
	if !f.HeadersEnded() {
		return false, nil
	}
	return true, h.end(limit, out)
}

// begin starts decoding a block.
func (h *headerBlockReader) begin(limit uint32) {
	h.fields = h.fields[:0]
	h.remaining, h.truncated, h.invalid, h.regular = limit, false, nil, false
	h.wire = 0
	h.hdec.SetEmitEnabled(true)
	h.hdec.SetMaxStringLength(int(limit))
}

// fragment decodes a fragment of the block as it comes: nothing of it is
// kept but the fields within the limit. A block far past the limit (the
// CONTINUATION flood) is a connection error, as the Framer's; one HPACK
// cannot decode too.
func (h *headerBlockReader) fragment(frag []byte, limit uint32) error {
	h.wire += len(frag)
	if h.wire > 2*int(limit) {
		return kindError{KindFlood, errHeaderFlood, http2.ConnectionError(http2.ErrCodeProtocol)}
	}
	if _, err := h.hdec.Write(frag); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	return nil
}

// end completes a block. A field that breaks the rules is a stream
// error.
func (h *headerBlockReader) end(limit uint32, out *decodedHeaders) error {
	if err := h.hdec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if cap(h.fields) > 256 {
		defer func() { h.fields = nil }()
	}
	if h.invalid != nil {
		return http2.StreamError{StreamID: h.stream, Code: http2.ErrCodeProtocol, Cause: h.invalid}
	}
	if err := checkPseudos(h.fields); err != nil {
		return http2.StreamError{StreamID: h.stream, Code: http2.ErrCodeProtocol, Cause: err}
	}
	*out = decodedHeaders{stream: h.stream, endStream: h.endStream, fields: h.fields, size: int(limit - h.remaining), truncated: h.truncated, priority: h.priority, prio: h.prio}
	return nil
}

// checkPseudos checks a request's pseudo-header fields (which come
// first): known ones, each once.
func checkPseudos(fields []hpack.HeaderField) error {
	for i, f := range fields {
		if !f.IsPseudo() {
			return nil
		}
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
		default:
			return errors.New("unknown pseudo-header field " + strings.TrimPrefix(f.Name, ":"))
		}
		for _, g := range fields[:i] {
			if g.Name == f.Name {
				return errors.New("repeated pseudo-header field " + f.Name)
			}
		}
	}
	return nil
}
