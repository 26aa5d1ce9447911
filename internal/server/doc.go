// Package server wires leasehold's parts together: the data directory's
// lock, certificates, authentication and authorization, the storage
// engine, the list of kinds and what is derived from it (codec, OpenAPI,
// the type converter of server-side apply), the admission chain, the
// registry, the controllers and the HTTP server. It is the only package
// that knows the concrete storage engines.
package server
