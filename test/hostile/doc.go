// Package hostile is a hostile HTTP/2 client: attacks on an HTTP/2
// server written as raw frames over TLS (x/net/http2's Framer and
// hpack), each run for a while over a number of connections, reporting
// what the server did to each attacking connection (GOAWAY and its
// code, a close, streams reset) and what the attack sent. A
// well-behaved client-go client (Renew) runs alongside to show what
// everyone else sees meanwhile.
//
// The attacks are those an HTTP/2 server must survive, as Go's does:
// control frames the server must answer while the client does not read
// (PING, SETTINGS, RST_STREAM, WINDOW_UPDATE floods behind a stalled
// write), answers that wait forever for flow-control window, rapid
// reset, CONTINUATION floods, HPACK bombs, streams past
// MAX_CONCURRENT_STREAMS and slowloris. test/hostile's tests run them
// against leasehold in-process; test/perf/h2attack runs them against
// any server given a kubeconfig, kube-apiserver included.
//
// Targets are loopback addresses only: Dial refuses any other.
package hostile
