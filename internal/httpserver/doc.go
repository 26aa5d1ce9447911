// Package httpserver is leasehold's HTTP face. It reads each request once
// (request.go: what authorization sees and what the router serves),
// runs kube-apiserver's filter chain (timeouts, authentication, in-flight
// limits, authorization: chain.go, limits.go, authz.go), routes resource
// requests to the registry's verbs (handlers.go), and writes answers and
// errors as kube-apiserver does (every error is a Status). Encoding is the
// codec's; a watch (watch.go) writes the frames the registry's watch
// gives and keeps the connection's write deadline. Discovery (derived
// from the served kinds, per group version), /version, the review
// endpoints and the health endpoints live here too, and kube-apiserver's
// request metrics with /metrics (metrics.go).
//
// Handlers return errors; one function (writeError) turns any error into
// the response, so the mapping to HTTP status codes lives in one place.
package httpserver
