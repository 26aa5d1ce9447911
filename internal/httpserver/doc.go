// Package httpserver is leasehold's HTTP face: it parses Kubernetes API
// paths, negotiates content, calls the registry, and writes answers and
// errors as kube-apiserver does (every error is a Status). Discovery,
// /version and the health endpoints live here too.
//
// Handlers return errors; one function (writeError) turns any error into
// the response, so the mapping to HTTP status codes lives in one place.
package httpserver
