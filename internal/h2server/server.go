package h2server

import (
	"context"
	"crypto/tls"
	"log"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/leasehold/leasehold/internal/workers"
)

// Defaults, as net/http's HTTP/2 server and kube-apiserver have them.
const (
	// defaultMaxStreams is the MAX_CONCURRENT_STREAMS kube-apiserver
	// advertises unless --http2-max-streams-per-connection says
	// otherwise (apiserver's secure serving, since golang/go#63417:
	// client-go's initial limit too). Each stream may hold a handler and
	// its answer: more streams a connection is more memory a client can
	// pin.
	defaultMaxStreams = 100
	// defaultMaxWaitingBytes bounds what one connection's answers may
	// hold while they wait for the client's flow-control window: more
	// than its 100 streams' answers hold in the usual chunks (a list is
	// written 256 KiB at a time), so that a client that stops reading
	// them all has them wait, as net/http's server does, rather than
	// reset and opened again, each a handler started (measured: a
	// zero-window attack at 16 MiB had 339,000 handlers start in 30 s).
	defaultMaxWaitingBytes = 32 << 20
	// defaultWriteByteTimeout closes a connection whose writes make no
	// progress for this long: a client that stopped reading.
	defaultWriteByteTimeout = 60 * time.Second
	// prefaceTimeout bounds the wait for the client's preface and
	// first SETTINGS frame.
	prefaceTimeout = 10 * time.Second
	// closeDelay lets a peer read a GOAWAY before the connection closes.
	closeDelay = time.Second
)

// Server serves the HTTP/2 connections an http.Server hands over after a
// TLS handshake that chose "h2" (Configure).
type Server struct {
	// MaxConcurrentStreams is advertised to clients: the streams a
	// connection may have open at once; 0 means 100.
	MaxConcurrentStreams uint32
	// MaxHeaderBytes limits a request's header list (names, values and
	// 32 bytes per field, as HTTP/2 counts it), at most 16 MiB; 0 means
	// the http.Server's MaxHeaderBytes (Configure), else 1 MiB.
	MaxHeaderBytes int
	// IdleTimeout closes a connection without streams for this long;
	// 0 means never.
	IdleTimeout time.Duration
	// WriteByteTimeout closes a connection when a write to it makes no
	// progress for this long; 0 means 60 s.
	WriteByteTimeout time.Duration
	// Hold is how long a connection whose client went past one of the
	// bounds of limits.go is held, unread, before it is closed
	// (defaultHold when 0).
	Hold time.Duration
	// MaxWaitingBytes bounds the bytes of answers one connection holds
	// while they wait for the client to open its flow-control window
	// (each waiting answer counts at least bufSize, for what its handler
	// holds besides); a stream whose wait would pass it is reset with
	// ENHANCE_YOUR_CALM. 0 means 32 MiB.
	MaxWaitingBytes int64
	// ErrorLog receives what goes wrong on connections (handler panics,
	// protocol errors of clients); nil means the log package's logger.
	ErrorLog *log.Logger
	// OnClientError, when set, is told of each error a client caused
	// that an attack would cause too (ClientError's kinds), for metrics
	// and a warning; it must not block.
	OnClientError func(ClientError)

	// pool runs handlers.
	pool workers.Pool

	mu           sync.Mutex
	conns        map[*conn]struct{}
	shuttingDown bool
}

// Configure makes hs hand its "h2" connections to s, and end them
// gracefully (GOAWAY, then close once their streams are done) when hs
// shuts down. hs.TLSConfig must offer "h2" in NextProtos.
func Configure(hs *http.Server, s *Server) {
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = hs.MaxHeaderBytes
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = hs.IdleTimeout
	}
	if s.ErrorLog == nil {
		s.ErrorLog = hs.ErrorLog
	}
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	hs.TLSNextProto["h2"] = func(_ *http.Server, tc *tls.Conn, h http.Handler) { s.ServeConn(tc, h) }
	hs.RegisterOnShutdown(s.shutdown)
}

// ServeConn serves HTTP/2 on tc, whose handshake is done, with h, until
// the connection and the handlers it started end. The requests' contexts derive from h's
// BaseContext when it has one (net/http's handler for a connection
// does), else from context.Background.
func (s *Server) ServeConn(tc *tls.Conn, h http.Handler) {
	base := context.Background()
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		base = bc.BaseContext()
	}
	state := tc.ConnectionState()
	c := newConn(s, tc, &state, h, base)
	c.cork = corkFor(tc)
	if !s.track(c) {
		c.closeNow()
		return
	}
	defer s.untrack(c)
	c.serve()
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// shutdown sends every connection a GOAWAY; each closes once its streams
// are done. http.Server.Shutdown waits for that.
func (s *Server) shutdown() {
	s.mu.Lock()
	s.shuttingDown = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goAway(http2.ErrCodeNo)
	}
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return defaultMaxStreams
	}
	return s.MaxConcurrentStreams
}

func (s *Server) hold() time.Duration {
	if s.Hold <= 0 {
		return defaultHold
	}
	return s.Hold
}

func (s *Server) maxWaitingBytes() int64 {
	if s.MaxWaitingBytes <= 0 {
		return defaultMaxWaitingBytes
	}
	return s.MaxWaitingBytes
}

func (s *Server) maxHeaderBytes() uint32 {
	if s.MaxHeaderBytes <= 0 {
		return 1 << 20
	}
	return uint32(min(s.MaxHeaderBytes, 16<<20))
}

func (s *Server) writeByteTimeout() time.Duration {
	if s.WriteByteTimeout == 0 {
		return defaultWriteByteTimeout
	}
	return s.WriteByteTimeout
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}
