package httpserver

import (
	"net/http"

	"github.com/leasehold/leasehold/internal/auth"
)

// serveChain serves every request but /version and the health endpoints
// through kube-apiserver's filters, in its order
// (apiserver/pkg/server/config.go DefaultBuildHandlerChain): the request
// deadline and timeout (not for watches and profiles), authentication
// (401), impersonation (400, 403), the in-flight limits (429),
// authorization (403), then the API.
func (s *Server) serveChain(w http.ResponseWriter, req *http.Request) {
	r := parseRequest(req)
	if longRunning(r.attrs) {
		defer s.recoverLongRunning(req)
		s.serveAuthenticated(w, req, r)
		return
	}
	s.withTimeout(w, req, r, func(w http.ResponseWriter, req *http.Request) {
		s.serveAuthenticated(w, req, r)
	})
}

func (s *Server) serveAuthenticated(w http.ResponseWriter, req *http.Request, shared *request) {
	// withTimeout still reads the request it shares with this handler.
	r := *shared
	if s.authn != nil {
		u, ok, err := s.authn.Authenticate(req)
		if err != nil || !ok {
			if err != nil {
				s.log.Debug("unable to authenticate the request", "method", req.Method, "uri", req.URL.RequestURI(), "err", err)
			}
			s.writeError(w, req, unauthorized())
			return
		}
		r.attrs.User = u
		imp, err := s.impersonate(req, r.attrs)
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		if imp != nil {
			s.log.Debug("impersonating", "user", u.Name, "as", imp.user.Name, "groups", imp.user.Groups)
			u = imp.user
		}
		r.attrs.User = u
		req = req.WithContext(auth.WithUser(req.Context(), u))
	}
	release, ok := s.limits.admit(r.attrs)
	if !ok {
		tooManyRequests(w)
		return
	}
	defer release()
	if err := s.authorize(req.Context(), req, &r); err != nil {
		s.writeError(w, req, err)
		return
	}
	// What was authorized, for the checks that authorize more (RBAC
	// escalation's escalate and bind verbs).
	req = req.WithContext(auth.WithRequest(req.Context(), r.attrs))
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
