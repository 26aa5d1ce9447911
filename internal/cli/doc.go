// Package cli is leasehold's command line: flags and subcommands. Run is
// the whole program, testable without a process.
package cli
