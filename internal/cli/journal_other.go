//go:build !unix

package cli

import "io"

// isJournal reports whether w is systemd's journal: never, off Unix.
func isJournal(io.Writer) bool { return false }
