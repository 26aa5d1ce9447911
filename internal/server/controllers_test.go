package server

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
)

// TestControllerList: the coordinated leader election controller runs
// with --coordinated-leader-election, and not without.
func TestControllerList(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		s, err := New(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CoordinatedLeaderElection: on})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range s.controllerList() {
			names = append(names, c.Name)
		}
		if got := slices.Contains(names, "coordinated-leader-election"); got != on || !slices.Contains(names, "namespace") {
			t.Errorf("coordinated leader election %v: controllers %q", on, names)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
