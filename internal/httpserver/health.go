package httpserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// HealthCheck is one named check of /healthz, /livez and /readyz.
type HealthCheck struct {
	Name string
	// Check returns nil when healthy.
	Check func(*http.Request) error
	// ReadyOnly checks count only for /readyz.
	ReadyOnly bool
}

var healthRoots = []string{"/healthz", "/livez", "/readyz"}

func isHealthPath(p string) bool {
	for _, root := range healthRoots {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// serveHealth answers the health endpoints as kube-apiserver does: "ok",
// or with ?verbose one line per check; failures answer 500 with every
// line but without the reason (the endpoints are public), which goes to
// the debug log; ?exclude=name skips a check. /<root>/<check> runs one check
// and answers "ok", or 500 "internal server error" (kube-apiserver adds
// the reason there, but its single checks are not public; here they are).
func (s *Server) serveHealth(w http.ResponseWriter, req *http.Request) {
	root, rest, sub := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	var checks []HealthCheck
	for _, c := range s.healthChecks() {
		if !c.ReadyOnly || root == "readyz" {
			checks = append(checks, c)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if sub {
		i := slices.IndexFunc(checks, func(c HealthCheck) bool { return c.Name == rest })
		if i < 0 {
			s.writeError(w, req, notFoundPath())
			return
		}
		if err := checks[i].Check(req); err != nil {
			s.log.Debug("health check failed", "check", rest, "err", err)
			http.Error(w, "internal server error", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
		return
	}

	query := req.URL.Query()
	unknown := map[string]bool{}
	for _, name := range query["exclude"] {
		unknown[name] = true
	}
	excluded := maps.Clone(unknown)
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			delete(unknown, c.Name)
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		if err := c.Check(req); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.Name)
			s.log.Debug("health check failed", "check", c.Name, "err", err)
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
	}
	if len(unknown) > 0 {
		names := slices.Sorted(maps.Keys(unknown))
		for i, n := range names {
			names[i] = strconv.Quote(n)
		}
		fmt.Fprintf(&b, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if failed {
		http.Error(w, b.String()+root+" check failed", http.StatusInternalServerError)
		return
	}
	if _, verbose := query["verbose"]; !verbose {
		fmt.Fprint(w, "ok")
		return
	}
	fmt.Fprintf(w, "%s%s check passed\n", b.String(), root)
}

func (s *Server) healthChecks() []HealthCheck {
	checks := []HealthCheck{
		{Name: "ping", Check: func(*http.Request) error { return nil }},
		{Name: "storage", Check: func(*http.Request) error { return s.ready() }},
	}
	for _, c := range s.cfg.ReadyChecks {
		c.ReadyOnly = true
		checks = append(checks, c)
	}
	return append(checks, HealthCheck{Name: "shutdown", ReadyOnly: true, Check: func(*http.Request) error {
		select {
		case <-s.shutdown.Done():
			return fmt.Errorf("server is shutting down")
		default:
			return nil
		}
	}})
}

// serveVersion answers /version.
func (s *Server) serveVersion(w http.ResponseWriter, req *http.Request) {
	data, err := json.MarshalIndent(s.version, "", "  ")
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
