package auth

import (
	"errors"
	"net/http"
)

// AuthenticatorConfig configures NewAuthenticator.
type AuthenticatorConfig struct {
	// ClientCAs verify client certificates; nil disables them.
	ClientCAs *CABundle
	// Tokens authenticate bearer tokens; with nil, every bearer token is
	// refused.
	Tokens *TokenFile
	// Anonymous lets requests without credentials in as system:anonymous
	// (kube-apiserver's --anonymous-auth).
	Anonymous bool
}

// Authenticator identifies the client of a request with kube-apiserver's
// authenticator chain: a client certificate, then a bearer token, then,
// when allowed, anonymous. The first method that recognises the request
// wins. Credentials that are presented but not valid (a certificate that
// does not verify, an unknown token) fail the request unless another
// method recognises it, even when anonymous requests are allowed.
type Authenticator struct {
	x509      *X509
	tokens    *TokenFile
	anonymous bool
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(cfg AuthenticatorConfig) *Authenticator {
	a := &Authenticator{tokens: cfg.Tokens, anonymous: cfg.Anonymous}
	if cfg.ClientCAs != nil {
		a.x509 = NewX509(cfg.ClientCAs)
	}
	return a
}

// Authenticate returns the request's user. ok is false, with a nil error,
// when the request carries no credentials and anonymous requests are
// refused; err is set when it carries credentials that are not valid.
// Authenticated users (not the anonymous one) get the group
// system:authenticated. A recognised bearer token is removed from the
// request, as kube-apiserver does.
func (a *Authenticator) Authenticate(req *http.Request) (User, bool, error) {
	var errs []error
	if a.x509 != nil {
		u, ok, err := a.x509.Authenticate(req)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			return withAuthenticatedGroup(u), true, nil
		}
	}
	// A bearer token nobody recognises is refused, with or without a
	// token file: a client whose token was revoked or mistyped must not
	// carry on as system:anonymous.
	if token, ok := bearerToken(req); ok {
		if a.tokens != nil {
			if u, ok := a.tokens.Lookup(token); ok {
				// The header map may be shared with another copy of
				// the request: change a copy.
				req.Header = req.Header.Clone()
				req.Header.Del("Authorization")
				return withAuthenticatedGroup(u), true, nil
			}
		}
		errs = append(errs, errInvalidToken)
	}
	if len(errs) > 0 {
		return User{}, false, errors.Join(errs...)
	}
	if a.anonymous {
		return anonymousUser(), true, nil
	}
	return User{}, false, nil
}
