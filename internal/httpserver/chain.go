package httpserver

import (
	"net/http"
	"strings"

	"github.com/leasehold/leasehold/internal/audit"
)

// serveChain serves every request through kube-apiserver's filters, in
// its order (apiserver/pkg/server/config.go DefaultBuildHandlerChain): the
// request deadline and its timeout parameter (not for watches and
// profiles: deadline.go), then /version, the health endpoints and the
// UI's static files, which need no credentials, and for the rest
// authentication (401), impersonation (400, 403), the in-flight limits
// (429), authorization (403), then the API.
func (s *Server) serveChain(w http.ResponseWriter, req *http.Request, call *request) {
	if longRunning(call.attrs) {
		defer s.recoverLongRunning(req)
		s.serveAuthenticated(w, req, call)
		return
	}
	s.withDeadline(w, req, call, s.servePublic)
}

// servePublic serves what needs no credentials, and passes the rest on.
func (s *Server) servePublic(w http.ResponseWriter, req *http.Request, call *request) {
	path := req.URL.Path
	switch {
	case path == "/version" || strings.HasPrefix(path, "/version/"):
		s.serveVersion(w, req)
	case isHealthPath(path):
		s.serveHealth(w, req)
	case s.cfg.UI != nil && (path == "/ui" || strings.HasPrefix(path, "/ui/")):
		// Static files, before authentication: the page asks for a
		// token and sends it with its own API requests.
		s.cfg.UI.ServeHTTP(w, req)
	default:
		s.serveAuthenticated(w, req, call)
	}
}

func (s *Server) serveAuthenticated(w http.ResponseWriter, req *http.Request, shared *request) {
	r := *shared
	// The request's context: with its deadline (withDeadline), the audit
	// record, then what was authorized.
	base := req.Context()
	if r.ctx != nil {
		base = r.ctx
	}
	if s.authn != nil {
		u, ok, err := s.authn.Authenticate(req)
		if err != nil || !ok {
			if err != nil {
				s.log.Debug("unable to authenticate the request", "method", req.Method, "uri", req.URL.RequestURI(), "err", err)
			}
			if rec := s.cfg.Audit.Begin(req, &r.attrs, false, r.auditID[0], r.received, false); rec != nil {
				st := s.errorStatus(req, unauthorized())
				rec.FailedAuthentication(st)
			}
			s.writeError(w, req, unauthorized())
			return
		}
		r.attrs.User = u
	}
	// The audit record begins once the client is known, before
	// impersonation, as kube-apiserver's audit filter does.
	if rec := s.cfg.Audit.Begin(req, &r.attrs, s.authn != nil, r.auditID[0], r.received, longRunning(r.attrs)); rec != nil {
		base = audit.WithRecord(base, rec)
		req = req.WithContext(base)
		w = &auditWriter{ResponseWriter: w, rec: rec}
		defer func() {
			if p := recover(); p != nil {
				rec.Panic(p)
				panic(p)
			}
			rec.Complete()
		}()
	}
	// The request's context gains what was authorized, the user with it;
	// the request is copied with it once (a copy is ~250 bytes, and a
	// renewal made five).
	if s.authn != nil {
		imp, err := s.impersonate(req, r.attrs)
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		if imp != nil {
			s.log.Debug("impersonating", "user", r.attrs.User.Name, "as", imp.user.Name, "groups", imp.user.Groups)
			audit.RecordFrom(req.Context()).ImpersonatedUser(imp.user, imp.constraint)
			r.attrs.User = imp.user
		}
	}
	release, ok := s.limits.admit(r.attrs)
	if !ok {
		tooManyRequests(w)
		return
	}
	defer release()
	if s.metrics != nil && !longRunning(r.attrs) {
		defer s.metrics.inflightStarted(mutating(r.attrs))()
	}
	if err := s.authorize(base, req, &r); err != nil {
		s.writeError(w, req, err)
		return
	}
	// What was authorized, for the checks that authorize more (RBAC
	// escalation's escalate and bind verbs).
	req = req.WithContext(newRequestContext(base, &r))
	if s.metrics != nil && longRunning(r.attrs) {
		defer s.metrics.longRunningStarted(s.labels(req, &r))()
	}
	if err := checkSelectors(&r); err != nil {
		s.writeError(w, req, err)
		return
	}
	if s.serveReview(w, req) {
		return
	}
	if err := s.serveAPI(w, req, &r); err != nil {
		s.writeError(w, req, err)
	}
}
