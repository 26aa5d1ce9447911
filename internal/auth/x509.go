package auth

import (
	"net/http"
)

// X509 authenticates requests by their verified client certificate. The TLS
// layer does the verification (tls.Config.ClientCAs with
// VerifyClientCertIfGiven); X509 maps the verified leaf to a user.
type X509 struct{}

// Authenticate implements httpserver.Authenticator.
func (X509) Authenticate(req *http.Request) (User, bool, error) {
	if req.TLS == nil || len(req.TLS.VerifiedChains) == 0 || len(req.TLS.VerifiedChains[0]) == 0 {
		return User{}, false, nil
	}
	leaf := req.TLS.VerifiedChains[0][0]
	if leaf.Subject.CommonName == "" {
		return User{}, false, nil
	}
	return User{
		Name:   leaf.Subject.CommonName,
		Groups: append([]string(nil), leaf.Subject.Organization...),
	}, true, nil
}
