package httpserver

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/auth"
)

// Impersonation, as kube-apiserver v1.36 does it with its
// ConstrainedImpersonation feature (beta, on by default;
// apiserver/pkg/endpoints/filters/impersonation): the Impersonate-User,
// -Uid, -Group and -Extra-KEY headers name a user to act as, and each
// mode is tried in turn until one allows it:
//
//   - the constrained modes, each for some users: arbitrary-node
//     (system:node:NAME), serviceaccount (system:serviceaccount:NS:NAME),
//     both with only a user name, and user-info (any other user, with
//     anything). A mode needs the verb impersonate-on:MODE:VERB on what
//     the request asks (VERB its own verb), then impersonate:MODE on each
//     part of the user: users (nodes, serviceaccounts), uids, groups and
//     userextras/KEY in authentication.k8s.io. They refuse the group
//     system:masters and malformed extras;
//   - the legacy mode: the verb impersonate on users (or serviceaccounts)
//     and groups in the core group, and on uids and userextras/KEY in
//     authentication.k8s.io.
//
// The first refusal is the answer when no mode allows. kube-apiserver
// also has an associated-node mode, for service accounts acting as the
// node their pod runs on; leasehold authenticates no service account
// tokens, so it never applies. kube-apiserver tries the mode that last
// worked for a requestor first, from a cache, so its first refusal can
// depend on history; leasehold keeps the fixed order.

// Well-known user names and groups of impersonation.
const (
	serviceAccountPrefix    = "system:serviceaccount:"
	allServiceAccountsGroup = "system:serviceaccounts"
	nodePrefix              = "system:node:"
	nodesGroup              = "system:nodes"
)

// manyChecks is how many groups or extra values make a constrained mode
// try one wildcard check first.
const manyChecks = 4

// impersonated is the outcome of impersonation: the user to act as and
// the verb of the constrained mode that allowed it ("" for legacy).
type impersonated struct {
	user       auth.User
	constraint string
}

// impersonate returns the user a request acts as when it carries
// Impersonate-* headers, which it removes; nil without them. a is what
// the request asks, with the authenticated user.
func (s *Server) impersonate(req *http.Request, a auth.Attributes) (*impersonated, error) {
	wanted, ok, err := wantedUser(req.Header)
	if err != nil || !ok {
		return nil, err
	}
	// The header map may be shared with another copy of the request (the
	// one the timeout filter keeps): change a copy.
	req.Header = req.Header.Clone()
	req.Header.Del(authenticationv1.ImpersonateUserHeader)
	req.Header.Del(authenticationv1.ImpersonateUIDHeader)
	req.Header.Del(authenticationv1.ImpersonateGroupHeader)
	for name := range req.Header {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			req.Header.Del(name)
		}
	}
	if s.authz == nil {
		return &impersonated{user: finishGroups(wanted)}, nil
	}
	var first error
	for _, m := range impersonationModes {
		if m.applies != nil && !m.applies(wanted) {
			continue
		}
		if m.name != "" {
			on := a
			on.Verb = "impersonate-on:" + m.name + ":" + a.Verb
			if err := s.check(on); err != nil {
				first = firstErr(first, err)
				continue
			}
		}
		u, err := s.impersonationChecks(m, a.User, wanted)
		if err != nil {
			first = firstErr(first, err)
			continue
		}
		constraint := ""
		if m.name != "" {
			constraint = "impersonate:" + m.name
		}
		return &impersonated{user: u, constraint: constraint}, nil
	}
	return nil, first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// impersonationMode is one way to be allowed to impersonate.
type impersonationMode struct {
	// name is the constrained mode's ("" for legacy).
	name string
	// applies reports whether the mode can impersonate the user; nil
	// for every user.
	applies func(wanted auth.User) bool
}

var impersonationModes = []impersonationMode{
	{name: "arbitrary-node", applies: func(w auth.User) bool {
		_, ok := nodeName(w.Name)
		return onlyName(w) && ok
	}},
	{name: "serviceaccount", applies: func(w auth.User) bool {
		_, _, ok := splitServiceAccount(w.Name)
		return onlyName(w) && ok
	}},
	{name: "user-info", applies: func(w auth.User) bool {
		_, node := nodeName(w.Name)
		_, _, sa := splitServiceAccount(w.Name)
		return !node && !sa
	}},
	{name: ""},
}

func onlyName(u auth.User) bool { return u.UID == "" && len(u.Groups) == 0 && len(u.Extra) == 0 }

// impersonationChecks authorizes each part of wanted for requestor in
// mode m, and returns the user to act as.
func (s *Server) impersonationChecks(m impersonationMode, requestor, wanted auth.User) (auth.User, error) {
	constrained := m.name != ""
	verb, group, version := "impersonate", "", "v1"
	if constrained {
		verb, group = "impersonate:"+m.name, authenticationv1.GroupName
	}
	attrs := func(g, resource, name string) auth.Attributes {
		return auth.Attributes{User: requestor, Verb: verb, ResourceRequest: true, APIGroup: g, APIVersion: version, Resource: resource, Name: name}
	}
	actual := wanted
	// The user name.
	user := attrs(group, "users", wanted.Name)
	if node, ok := nodeName(wanted.Name); ok && constrained {
		user.Resource, user.Name = "nodes", node
		if len(wanted.Groups) != 0 {
			return auth.User{}, forbidden(user, fmt.Sprintf("when impersonating a node, cannot impersonate groups %q", wanted.Groups))
		}
		actual.Groups = []string{nodesGroup}
	}
	if ns, name, ok := splitServiceAccount(wanted.Name); ok {
		user.Resource, user.Namespace, user.Name = "serviceaccounts", ns, name
		if constrained && len(wanted.Groups) != 0 {
			return auth.User{}, forbidden(user, fmt.Sprintf("when impersonating a service account, cannot impersonate groups %q", wanted.Groups))
		}
		if len(wanted.Groups) == 0 {
			actual.Groups = []string{allServiceAccountsGroup, allServiceAccountsGroup + ":" + ns}
		}
	}
	if err := s.check(user); err != nil {
		return auth.User{}, err
	}
	if wanted.UID != "" {
		if err := s.check(attrs(authenticationv1.GroupName, "uids", wanted.UID)); err != nil {
			return auth.User{}, err
		}
	}
	if len(wanted.Groups) > 0 {
		g := attrs(group, "groups", "")
		if constrained {
			if slices.Contains(wanted.Groups, "") {
				return auth.User{}, forbidden(g, "impersonating the empty string group is not allowed")
			}
			if slices.Contains(wanted.Groups, auth.SystemPrivilegedGroup) {
				g.Name = auth.SystemPrivilegedGroup
				return auth.User{}, forbidden(g, "impersonating the system:masters group is not allowed")
			}
		}
		all := false
		if constrained && len(wanted.Groups) >= manyChecks {
			g.Name = "*"
			all = s.check(g) == nil
		}
		for _, name := range wanted.Groups {
			if all {
				break
			}
			g.Name = name
			if err := s.check(g); err != nil {
				return auth.User{}, err
			}
		}
	}
	if len(wanted.Extra) > 0 {
		e := attrs(authenticationv1.GroupName, "userextras", "")
		if constrained {
			if err := validateExtra(wanted.Extra); err != nil {
				return auth.User{}, forbidden(e, err.Error())
			}
		}
		all := false
		if constrained && largeExtra(wanted.Extra) {
			e.Subresource, e.Name = "*", "*"
			all = s.check(e) == nil
		}
		for key, values := range wanted.Extra {
			if all {
				break
			}
			e.Subresource = key
			for _, v := range values {
				e.Name = v
				if err := s.check(e); err != nil {
					return auth.User{}, err
				}
			}
		}
	}
	return finishGroups(actual), nil
}

// finishGroups puts the anonymous user in system:unauthenticated, and
// any other in system:authenticated unless its groups say
// system:unauthenticated.
func finishGroups(u auth.User) auth.User {
	ensure := func(g string) {
		if !slices.Contains(u.Groups, g) {
			u.Groups = append(slices.Clip(u.Groups), g)
		}
	}
	if u.Name == auth.Anonymous {
		ensure(auth.AllUnauthenticated)
	} else if !slices.Contains(u.Groups, auth.AllUnauthenticated) {
		ensure(auth.AllAuthenticated)
	}
	return u
}

// check authorizes a, refusing with kube-apiserver's 403.
func (s *Server) check(a auth.Attributes) error {
	if d, reason := s.authz.Authorize(a); d != auth.DecisionAllow {
		return forbidden(a, reason)
	}
	return nil
}

// wantedUser reads the impersonation headers; ok is false without them.
// A uid, groups or extras without a user name are kube-apiserver's 400.
func wantedUser(h http.Header) (u auth.User, ok bool, err error) {
	u.Name = h.Get(authenticationv1.ImpersonateUserHeader)
	u.UID = h.Get(authenticationv1.ImpersonateUIDHeader)
	u.Groups = h[authenticationv1.ImpersonateGroupHeader]
	hasExtra := false
	for name, values := range h {
		if !strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		hasExtra = true
		if len(values) == 0 {
			continue
		}
		key := strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[key] = append(u.Extra[key], values...)
	}
	if u.Name == "" && (u.UID != "" || len(u.Groups) > 0 || hasExtra) {
		// Worded as kube-apiserver prints its user.DefaultInfo with %#v.
		return u, false, apierrors.NewBadRequest(fmt.Sprintf("requested &user.DefaultInfo{Name:%#v, UID:%#v, Groups:%#v, Extra:%#v} without impersonating a user name",
			u.Name, u.UID, u.Groups, u.Extra))
	}
	return u, u.Name != "", nil
}

// validateExtra is the constrained modes' check of extra keys and values.
func validateExtra(extra map[string][]string) error {
	p := field.NewPath("extra", "key")
	for key, values := range extra {
		switch {
		case key == "":
			return fmt.Errorf("impersonating the empty string key in extra is not allowed")
		case len(utilvalidation.IsDomainPrefixedPath(p, key)) > 0:
			return fmt.Errorf("impersonating an invalid key in extra is not allowed: %w", utilvalidation.IsDomainPrefixedPath(p, key).ToAggregate())
		case key != strings.ToLower(key):
			return fmt.Errorf("impersonating a non-lowercase key in extra is not allowed: %q", key)
		case len(values) == 0:
			return fmt.Errorf("impersonating empty values in extra is not allowed")
		case slices.Contains(values, ""):
			return fmt.Errorf("impersonating the empty string value in extra is not allowed")
		}
	}
	return nil
}

func largeExtra(extra map[string][]string) bool {
	n := 0
	for _, v := range extra {
		n += len(v)
	}
	return len(extra) >= manyChecks || n >= manyChecks
}

// nodeName returns the node of a node's user name, system:node:NAME.
func nodeName(user string) (string, bool) {
	name, ok := strings.CutPrefix(user, nodePrefix)
	if !ok || len(apivalidation.NameIsDNSSubdomain(name, false)) != 0 {
		return "", false
	}
	return name, true
}

// splitServiceAccount splits a service account's user name,
// system:serviceaccount:NAMESPACE:NAME, when both parts are valid names
// (apiserver's serviceaccount.SplitUsername).
func splitServiceAccount(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, serviceAccountPrefix)
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 {
		return "", "", false
	}
	if len(apivalidation.ValidateNamespaceName(parts[0], false)) != 0 || len(apivalidation.ValidateServiceAccountName(parts[1], false)) != 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}
