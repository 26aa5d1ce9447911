package cli

import (
	"io"
	"log/slog"
	"os"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify tells the service manager how the server is doing, with
// systemd's notification protocol (sd_notify(3): a datagram to the socket
// $NOTIFY_SOCKET names, which systemd sets for Type=notify services). It
// does nothing without $NOTIFY_SOCKET, and a failure to send is logged,
// not fatal: the server serves either way.
func notify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("telling the service manager failed", "socket", os.Getenv("NOTIFY_SOCKET"), "err", err)
	}
}

// logAttrs returns the slog.HandlerOptions.ReplaceAttr for logs written
// to w: when w is systemd's journal, which time-stamps every line itself,
// the time is left out; otherwise nothing changes.
func logAttrs(w io.Writer) func(groups []string, a slog.Attr) slog.Attr {
	if !isJournal(w) {
		return nil
	}
	return func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
}
