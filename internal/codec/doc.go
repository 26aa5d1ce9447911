// Package codec turns API objects into bytes and back: content negotiation
// (Accept and Content-Type, as kube-apiserver negotiates them), the JSON,
// YAML and protobuf wire formats, the storage encoding, the transforms
// (Table, PartialObjectMetadata), and the framing of watch events. Its
// scheme is built from the list of served kinds.
//
// The registry hands out objects of each kind's storage version; the
// encoders here convert them to the requested version. Encoding is the
// expensive part of a read, so an object the watch cache holds is encoded
// once per wire format and version and kept in its Memo, and a watch
// event once per output in its EventMemo: lists, single reads and watch
// streams are assembled from those bytes (item.go). This package owns
// both memos.
//
// Decoding a client's object (DecodeObject) is the one place a version's
// defaults are applied.
package codec
