// Package h2server is an HTTP/2 server (RFC 9113) for the TLS
// connections net/http accepts: http.Server keeps the listener, the
// handshake and HTTP/1.1, and hands each connection that negotiated "h2"
// to Server.ServeConn (Configure installs it in TLSNextProto).
//
// It exists for the cost of a small request. net/http's HTTP/2 server
// passes every frame read, every response and every flush through the
// connection's serving goroutine, and flushes a response's HEADERS and
// DATA frames apart: a lease renewal there costs two TLS records, two
// write system calls and about eight goroutine switches. Here one
// goroutine per connection reads and handles frames, a handler runs on
// a pooled goroutine, and writes its own response: HEADERS and DATA
// encoded together into the connection's buffer and written at once by
// whichever goroutine finds the connection idle (writes arriving while
// another is under way go out with the next one).
//
// Frames are read with golang.org/x/net/http2's Framer and header
// blocks coded with its hpack; the frames it sends, this package
// encodes into the connection's buffer itself, and it decodes header
// blocks itself (into a field slice it reuses), with the Framer's checks
// of header fields. It keeps the connection's state: streams, flow
// control both ways, settings, GOAWAY, and the limits a hostile client
// meets, each bounding what a client can make a connection hold
// (limits.go: control frames it does not read, answers waiting for its
// window, requests queued behind reset streams, header blocks, writes
// that make no progress), each reported to OnClientError by kind.
//
// internal/transport serves with it by default, and with net/http's
// HTTP/2 server instead when told (--http2-server=go): a handler must
// need nothing of this package that net/http's writer lacks.
package h2server
