package httpserver

import (
	"context"
	"net/http"

	"github.com/leasehold/leasehold/internal/auth"
)

type userKey struct{}

func withUser(ctx context.Context, u auth.User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the authenticated user of a request.
func userFrom(ctx context.Context) (auth.User, bool) {
	u, ok := ctx.Value(userKey{}).(auth.User)
	return u, ok
}

// serveChain serves every request but /version, the health endpoints and
// the UI's static files through kube-apiserver's filters, in its order
// (apiserver/pkg/server/config.go DefaultBuildHandlerChain): the request
// deadline and timeout (not for watches and profiles), authentication
// (401), the in-flight limits (429), authorization (403), then the API.
func (s *Server) serveChain(w http.ResponseWriter, req *http.Request, r *request) {
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
		req = req.WithContext(withUser(req.Context(), u))
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
	if err := s.authorize(req.Context(), req, &r); err != nil {
		s.writeError(w, req, err)
		return
	}
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
