package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFree(t *testing.T) {
	ps, err := Free(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Errorf("port %d twice in %v", p, ps)
		}
		seen[p] = true
		if p >= ephemeralStart() {
			t.Errorf("port %d in the ephemeral range (from %d)", p, ephemeralStart())
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}
