// Package bench is leasehold's load tool ("leasehold bench"): scenarios
// that drive a running server through its API, as real clients would, and
// report latencies, throughput and, given the server's pid, its CPU and
// memory. It measures; it asserts nothing.
package bench
