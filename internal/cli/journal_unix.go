//go:build unix

package cli

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// isJournal reports whether w is the stream systemd connected to its
// journal: $JOURNAL_STREAM names its device and inode (systemd.exec(5)).
func isJournal(w io.Writer) bool {
	stream := os.Getenv("JOURNAL_STREAM")
	f, ok := w.(*os.File)
	if stream == "" || !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fmt.Sprintf("%d:%d", st.Dev, st.Ino) == stream
}
