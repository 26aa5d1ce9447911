// Package transport serves a handler over TLS with HTTP/1.1 and HTTP/2,
// and holds every timeout and limit of the connections in one place:
// the header timeout, the idle timeout, the stall timeout of writes that
// make no progress, the header and stream limits. A request's own
// deadlines (its timeout, its body's reads, its answer's writes) are
// internal/httpserver's (deadline.go), set through
// http.ResponseController, which every server here honours.
//
// HTTP/2 is served by leasehold's own server (internal/h2server) or, the
// day an attack on it is published, by net/http's (HTTP2Go): the same
// limits, the same timeouts, one flag apart.
package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/h2server"
)

// The HTTP/2 servers.
const (
	// HTTP2Leasehold is internal/h2server: a small request costs less
	// (see its package documentation).
	HTTP2Leasehold = "leasehold"
	// HTTP2Go is net/http's HTTP/2 server, kube-apiserver's.
	HTTP2Go = "go"
)

// The connections' timeouts and limits, as kube-apiserver has them
// unless said.
const (
	// ReadHeaderTimeout bounds the TLS handshake and an HTTP/1.1
	// request's header (kube-apiserver: 32 s; a client that slow is
	// a slowloris).
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a connection without requests for this long.
	IdleTimeout = 90 * time.Second
	// WriteByteTimeout ends a connection whose writes make no progress
	// for this long (a client that stopped reading), and on leasehold's
	// HTTP/2 server a stream given no flow-control window for this long.
	WriteByteTimeout = 60 * time.Second
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes = 1 << 20
	// MaxConcurrentStreams is the streams an HTTP/2 connection may have
	// open at once.
	MaxConcurrentStreams = 100
	// receiveWindow is an HTTP/2 stream's and connection's receive
	// window: request bodies a connection may have sent unread.
	receiveWindow = 1 << 20
)

// Config configures a server.
type Config struct {
	Handler   http.Handler
	TLSConfig *tls.Config
	// HTTP2 chooses the HTTP/2 server: HTTP2Leasehold ("" too) or
	// HTTP2Go.
	HTTP2 string
	// ErrorLog receives what goes wrong on connections.
	ErrorLog *log.Logger
	// OnClientError, when set, is told of clients' errors that attacks
	// cause too (h2server.ClientError; net/http's server gives their
	// kind only, and no connection's first).
	OnClientError func(h2server.ClientError)
}

// New returns an http.Server serving cfg.Handler with cfg's HTTP/2
// server; serve it with Serve.
func New(cfg Config) (*http.Server, error) {
	tlsConfig := cfg.TLSConfig.Clone()
	if !slices.Contains(tlsConfig.NextProtos, "h2") {
		tlsConfig.NextProtos = append([]string{"h2"}, tlsConfig.NextProtos...)
	}
	if !slices.Contains(tlsConfig.NextProtos, "http/1.1") {
		tlsConfig.NextProtos = append(tlsConfig.NextProtos, "http/1.1")
	}
	hs := &http.Server{
		Handler:           cfg.Handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          cfg.ErrorLog,
	}
	switch cfg.HTTP2 {
	case "", HTTP2Leasehold:
		h2server.Configure(hs, &h2server.Server{
			MaxConcurrentStreams: MaxConcurrentStreams,
			WriteByteTimeout:     WriteByteTimeout,
			OnClientError:        cfg.OnClientError,
		})
	case HTTP2Go:
		hs.HTTP2 = &http.HTTP2Config{
			MaxConcurrentStreams:          MaxConcurrentStreams,
			MaxReceiveBufferPerConnection: receiveWindow,
			MaxReceiveBufferPerStream:     receiveWindow,
			WriteByteTimeout:              WriteByteTimeout,
			CountError: func(errType string) {
				if cfg.OnClientError != nil {
					cfg.OnClientError(h2server.ClientError{Kind: goErrorKind(errType), Err: errors.New(errType)})
				}
			},
		}
	default:
		return nil, fmt.Errorf("unknown HTTP/2 server %q: want %q or %q", cfg.HTTP2, HTTP2Leasehold, HTTP2Go)
	}
	return hs, nil
}

// goErrorKind is the kind of an error net/http's HTTP/2 server counts
// (x/net/http2's countError names).
func goErrorKind(errType string) string {
	if errType == "too_many_early_resets" {
		return h2server.KindReset
	}
	return h2server.KindProtocol
}

// Serve serves hs, from New, on ln until hs shuts down or ln closes:
// TLS on h2server.Listener's connections, which take the records of a
// large HTTP/2 write in one system call.
func Serve(hs *http.Server, ln net.Listener) error {
	return hs.ServeTLS(h2server.Listener(ln), "", "")
}
