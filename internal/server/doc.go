// Package server wires leasehold's parts together: storage engine,
// registry and watch caches, certificates, authentication and the HTTP
// server. It is the only package that knows the concrete storage engines.
package server
