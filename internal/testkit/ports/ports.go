// Package ports finds loopback ports for test servers, below the kernel's
// ephemeral range: every outgoing connection takes its source port from
// that range, so a port the kernel picked there (":0") can be taken by
// any test's client while its server is down for a restart on the same
// address ("address already in use"). Below it, only another test's
// pick can take it.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// span is how many ports below the ephemeral range are picked from.
const span = 20000

// Free returns n distinct loopback ports that were free a moment ago.
func Free(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	hi := ephemeralStart()
	lo := max(hi-span, 1024)
	var ports []int
	for len(ports) < n {
		ln, err := listen(lo, hi)
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Addr returns a loopback address ("127.0.0.1:PORT") whose port was free
// a moment ago.
func Addr(t testing.TB) string {
	t.Helper()
	p, err := Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0]))
}

// listen listens on a random port in [lo, hi), or on one the kernel
// picks when none of a few tries is free.
func listen(lo, hi int) (net.Listener, error) {
	for range 100 {
		if hi <= lo {
			break
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo)))
		if err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return p
}
