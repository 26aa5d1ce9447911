package httpserver

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealth: kube-apiserver's health output, passing and failing, with
// excluded and unknown checks; the reason of a failure only in the log.
func TestHealth(t *testing.T) {
	var ready, space error
	logs := &syncBuffer{}
	p := newInProcess(t, func(c *Config) {
		c.Ready = func() error { return ready }
		c.ReadyChecks = []HealthCheck{{Name: "storage-space", Check: func(*http.Request) error { return space }}}
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for _, tc := range []struct {
		target string
		fail   bool
		code   int
		body   string
	}{
		{"/readyz", false, 200, "ok"},
		{"/livez?verbose", false, 200, "[+]ping ok\n[+]storage ok\nlivez check passed\n"},
		{"/readyz?verbose&exclude=shutdown&exclude=nope&exclude=etcd", false, 200,
			"[+]ping ok\n[+]storage ok\n[+]storage-space ok\n[+]shutdown excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"etcd\",\"nope\"\nreadyz check passed\n"},
		{"/readyz/storage", false, 200, "ok"},
		{"/readyz", true, 500, "[+]ping ok\n[-]storage failed: reason withheld\n[+]storage-space ok\n[+]shutdown ok\nreadyz check failed\n"},
		{"/healthz?exclude=storage", true, 200, "ok"},
		{"/readyz/storage", true, 500, "internal server error\n"},
		{"/readyz/ping", true, 200, "ok"},
	} {
		ready = nil
		if tc.fail {
			ready = errors.New("etcd at 10.0.0.1:2379 unreachable")
		}
		w := p.do("GET", tc.target, "", nil)
		if w.Code != tc.code || w.Body.String() != tc.body || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%s (storage failing: %v): %d %q (%s), want %d %q", tc.target, tc.fail, w.Code, w.Body, w.Header().Get("Content-Type"), tc.code, tc.body)
		}
	}
	if !strings.Contains(logs.String(), "etcd at 10.0.0.1:2379 unreachable") {
		t.Error("the reason of the failure is not in the log")
	}
	// A failing ready check fails /readyz alone.
	ready, space = nil, errors.New("database space exceeded")
	for target, want := range map[string]string{
		"/readyz":               "[+]ping ok\n[+]storage ok\n[-]storage-space failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n",
		"/livez":                "ok",
		"/healthz":              "ok",
		"/readyz/storage-space": "internal server error\n",
	} {
		if w := p.do("GET", target, "", nil); w.Body.String() != want {
			t.Errorf("%s with storage-space failing: %d %q, want %q", target, w.Code, w.Body, want)
		}
	}
	// A check that does not exist, or none named, is the API's 404.
	for _, target := range []string{"/livez/shutdown", "/readyz/", "/healthz/nope"} {
		w := p.do("GET", target, "", nil)
		if w.Code != 404 || !strings.Contains(w.Body.String(), `"reason":"NotFound"`) {
			t.Errorf("%s: %d %s, want a NotFound Status", target, w.Code, w.Body)
		}
	}
}

// TestPublicPathsTimeout: /version and the health endpoints go through
// the request filters too: a timeout that does not parse is kube-apiserver's
// 400, and a good one is served.
func TestPublicPathsTimeout(t *testing.T) {
	s := newBareServer(t)
	for _, path := range []string{"/version", "/healthz", "/livez", "/readyz", "/readyz/storage"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path+"?timeout=invalid", nil))
		st := statusOf(t, w)
		if w.Code != http.StatusBadRequest || !strings.HasPrefix(st.Message, "invalid timeout specified in the request URL - ") {
			t.Errorf("%s?timeout=invalid: %d %+v", path, w.Code, st)
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path+"?timeout=5s", nil))
		if w.Code != http.StatusOK && !(path == "/readyz/storage" && w.Code == http.StatusNotFound) {
			t.Errorf("%s?timeout=5s: %d %s", path, w.Code, w.Body)
		}
	}
}
