// Package deptest holds the test that keeps leasehold's packages layered
// as docs/design.md draws them: it reads the import graph with `go list` and
// fails when a package imports one it must not (in the manner of
// tailscale's tstest/deptest). The rules are in deptest_test.go.
package deptest
