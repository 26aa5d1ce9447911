package hostile

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Target is the server attacked.
type Target struct {
	// Addr is host:port; the host must be a loopback address.
	Addr string
	// TLS is the client's TLS configuration: the server's roots, and the
	// client certificate when the server authenticates by certificate.
	TLS *tls.Config
	// Token, when set, is sent as a bearer token.
	Token string
	// LargePath answers with hundreds of KiB or more (a list of many
	// leases): an answer that stalls in the socket of a client that does
	// not read.
	LargePath string
	// SmallPath answers with little, cheaply (a GET of one lease).
	SmallPath string
	// WatchPath answers with headers and then nothing for a long while
	// (a watch that matches no object).
	WatchPath string
}

// TargetFor is the target of a client-go config: its host, TLS
// configuration and bearer token. The caller sets the paths.
func TargetFor(cfg *rest.Config) (Target, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return Target{}, fmt.Errorf("the config's host %q: %w", cfg.Host, err)
	}
	if u.Scheme != "https" {
		return Target{}, fmt.Errorf("the config's host %q is not https", cfg.Host)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	tc, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return Target{}, err
	}
	if tc == nil {
		tc = &tls.Config{}
	}
	return Target{Addr: addr, TLS: tc, Token: cfg.BearerToken}, nil
}

// errNotLoopback: attacks go to this machine's own servers only.
var errNotLoopback = errors.New("hostile: the target is not a loopback address")

// checkLoopback refuses any address but a loopback IP.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %s", errNotLoopback, addr)
	}
	return nil
}

// dialTLS opens a TLS connection that negotiated "h2". rcvbuf, when
// positive, is the socket's receive buffer, set before the connection
// is made so that the window the kernel advertises starts small too.
func dialTLS(ctx context.Context, tg Target, rcvbuf int) (*tls.Conn, error) {
	if err := checkLoopback(tg.Addr); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	nc, err := d.DialContext(ctx, "tcp", tg.Addr)
	if err != nil {
		return nil, err
	}
	cfg := tg.TLS.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, _ := net.SplitHostPort(tg.Addr)
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return nil, fmt.Errorf("the server chose %q, not h2", p)
	}
	return tc, nil
}
