// Package httpserver is leasehold's HTTP face. It reads each request once
// (request.go: what authorization sees and what the router serves),
// runs kube-apiserver's filter chain (the request's deadline,
// authentication, in-flight limits, authorization: chain.go, deadline.go,
// limits.go, authz.go), routes resource requests to the registry's verbs
// (handlers.go), and writes answers and errors as kube-apiserver does
// (every error is a Status). Encoding is the codec's; a watch (watch.go)
// writes the frames the registry's watch gives, each write under a stall
// guard. A request's deadlines reach the connection through
// http.ResponseController only, so they hold alike on HTTP/1.1 and on
// either HTTP/2 server (internal/transport). Discovery (derived
// from the served kinds, per group version), /version, the review
// endpoints and the health endpoints live here too, and kube-apiserver's
// request metrics with /metrics (metrics.go).
//
// Handlers return errors; one function (writeError) turns any error into
// the response, so the mapping to HTTP status codes lives in one place.
package httpserver
