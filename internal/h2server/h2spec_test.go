package h2server

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestH2Spec runs h2spec, the HTTP/2 conformance suite, against the
// server: every test of RFC 7540 and RFC 7541 it has, strict ones
// included. CI installs it (.ci/run); elsewhere the test is skipped
// without it (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible).
// The handler reads the whole request before answering, so that a
// malformed body is seen before the stream ends, whatever the timing.
func TestH2Spec(t *testing.T) {
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("h2spec"); err != nil {
			t.Skip("h2spec is not installed (set $H2SPEC or put it on $PATH)")
		}
	}
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(append([]byte("ok "), body...))
	}), nil)
	port := ts.Listener.Addr().String()[strings.LastIndex(ts.Listener.Addr().String(), ":")+1:]
	out, err := exec.CommandContext(t.Context(), bin, "-t", "-k", "-S", "-h", "127.0.0.1", "-p", port, "-o", "5").CombinedOutput()
	summary := regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`).FindStringSubmatch(string(out))
	if summary == nil {
		t.Fatalf("h2spec: %v\n%s", err, out)
	}
	// (A strict test of 6.9.2 skips itself: it needs a response body
	// larger than a window it shrinks to a negative size.)
	if summary[4] != "0" {
		i := strings.Index(string(out), "Failures:")
		t.Fatalf("h2spec: %s\n%s", summary[0], out[max(i, 0):])
	}
	t.Log("h2spec:", summary[0])
}
