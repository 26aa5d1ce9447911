package auth

import (
	"context"
	"slices"
)

// User is an authenticated client, or the anonymous user.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra holds what an authenticator adds about the credential, such as
	// the credential id of a client certificate (CredentialIDKey).
	Extra map[string][]string
}

// Well-known user and group names, as in
// k8s.io/apiserver/pkg/authentication/user.
const (
	// SystemPrivilegedGroup may do everything.
	SystemPrivilegedGroup = "system:masters"
	// AllAuthenticated is the group of every authenticated user.
	AllAuthenticated = "system:authenticated"
	// AllUnauthenticated is the group of the anonymous user.
	AllUnauthenticated = "system:unauthenticated"
	// Anonymous is the user of requests without credentials, when they
	// are allowed.
	Anonymous = "system:anonymous"
	// CredentialIDKey is the Extra key identifying the credential used.
	CredentialIDKey = "authentication.kubernetes.io/credential-id"
)

// InGroup reports whether the user is a member of group.
func (u User) InGroup(group string) bool {
	return slices.Contains(u.Groups, group)
}

// anonymousUser is the user of requests without credentials.
func anonymousUser() User {
	return User{Name: Anonymous, Groups: []string{AllUnauthenticated}}
}

// withAuthenticatedGroup adds system:authenticated to an authenticated
// user's groups unless it is anonymous or already carries
// system:authenticated or system:unauthenticated, as kube-apiserver's
// AuthenticatedGroupAdder does
// (apiserver/pkg/authentication/group/authenticated_group_adder.go).
func withAuthenticatedGroup(u User) User {
	if u.Name == Anonymous || u.InGroup(AllAuthenticated) || u.InGroup(AllUnauthenticated) {
		return u
	}
	groups := make([]string, 0, len(u.Groups)+1)
	u.Groups = append(append(groups, u.Groups...), AllAuthenticated)
	return u
}

// UserFrom returns the user a request is made as: the authenticated user,
// or the one it impersonates (the user of its Attributes, see
// RequestKey). Writes the server makes itself, and requests to a server
// without authentication, carry none.
func UserFrom(ctx context.Context) (User, bool) {
	a, ok := RequestFrom(ctx)
	return a.User, ok && a.User.Name != ""
}

type requestKey struct{}

// RequestKey is the context key of a request's Attributes, as authorized
// (kube-apiserver's RequestInfo with the user): httpserver's request
// context answers it with a *Attributes (a pointer: an Attributes in an
// interface would be a copy on the heap per look-up).
var RequestKey any = requestKey{}

// RequestFrom returns what the request of ctx asks; false for writes the
// server makes itself.
func RequestFrom(ctx context.Context) (Attributes, bool) {
	a, ok := ctx.Value(RequestKey).(*Attributes)
	if !ok {
		return Attributes{}, false
	}
	return *a, true
}
