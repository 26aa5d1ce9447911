// Package integration drives a real leasehold server, started on a
// loopback port with a temporary data directory, with client-go: the
// typed clientset in JSON and protobuf, the dynamic and raw REST clients.
package integration
