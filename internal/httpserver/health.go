package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
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
// or with ?verbose one line per check; failures answer 500 without the
// reason; /<root>/<check> runs one check; ?exclude=name skips checks.
func (s *Server) serveHealth(w http.ResponseWriter, req *http.Request) {
	root, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	kind := root
	checks := s.healthChecks()
	var selected []HealthCheck
	excluded := map[string]bool{}
	for _, e := range req.URL.Query()["exclude"] {
		excluded[e] = true
	}
	for _, c := range checks {
		if c.ReadyOnly && root != "readyz" {
			continue
		}
		if rest != "" && c.Name != rest {
			continue
		}
		if excluded[c.Name] {
			continue
		}
		selected = append(selected, c)
	}
	if rest != "" && len(selected) == 0 {
		http.NotFound(w, req)
		return
	}
	var b strings.Builder
	failed := false
	for _, c := range selected {
		if err := c.Check(req); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.Name)
			s.log.Info("health check failed", "check", c.Name, "err", err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, verbose := req.URL.Query()["verbose"]
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s%s check failed\n", b.String(), kind)
		return
	}
	if verbose {
		fmt.Fprintf(w, "%s%s check passed\n", b.String(), kind)
		return
	}
	fmt.Fprint(w, "ok")
}

func (s *Server) healthChecks() []HealthCheck {
	return []HealthCheck{
		{Name: "ping", Check: func(*http.Request) error { return nil }},
		{Name: "storage", Check: func(*http.Request) error { return s.ready() }},
		{Name: "shutdown", ReadyOnly: true, Check: func(*http.Request) error {
			select {
			case <-s.shutdown:
				return fmt.Errorf("server is shutting down")
			default:
				return nil
			}
		}},
	}
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
