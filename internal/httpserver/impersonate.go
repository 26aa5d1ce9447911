package httpserver

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/leasehold/leasehold/internal/auth"
)

// Service account user names and groups, as apiserver's serviceaccount
// package makes them.
const (
	serviceAccountPrefix    = "system:serviceaccount:"
	allServiceAccountsGroup = "system:serviceaccounts"
)

// impersonate returns the user a request acts as: u, or, when the request
// carries Impersonate-User (with Impersonate-Group, Impersonate-Uid and
// Impersonate-Extra-KEY), the user those headers name, once u is
// authorized to impersonate each of them, as kube-apiserver's
// impersonation filter does (apiserver/pkg/endpoints/filters/
// impersonation/impersonation.go): verb "impersonate" on users (or
// serviceaccounts, for a service account's user name), groups, uids
// (authentication.k8s.io) and userextras/KEY (authentication.k8s.io), the
// name being what is impersonated. The headers are removed from the
// request. ok is false without impersonation.
func (s *Server) impersonate(req *http.Request, u auth.User) (as auth.User, ok bool, err error) {
	refs, err := impersonationRequests(req.Header)
	if err != nil || len(refs) == 0 {
		return u, false, err
	}
	groupsGiven := len(req.Header[authenticationv1.ImpersonateGroupHeader]) > 0
	var (
		username string
		uid      string
		groups   = []string{}
		extra    = map[string][]string{}
	)
	for _, ref := range refs {
		a := auth.Attributes{User: u, Verb: "impersonate", ResourceRequest: true, Namespace: ref.Namespace, Name: ref.Name}
		switch ref.Kind {
		case "ServiceAccount":
			a.APIVersion, a.Resource = "v1", "serviceaccounts"
			username = serviceAccountPrefix + ref.Namespace + ":" + ref.Name
			if !groupsGiven {
				groups = []string{allServiceAccountsGroup, allServiceAccountsGroup + ":" + ref.Namespace}
			}
		case "User":
			a.Resource = "users"
			username = ref.Name
		case "Group":
			a.Resource = "groups"
			groups = append(groups, ref.Name)
		case "UserExtra":
			a.APIGroup, a.APIVersion, a.Resource, a.Subresource = authenticationv1.GroupName, "v1", "userextras", ref.FieldPath
			extra[ref.FieldPath] = append(extra[ref.FieldPath], ref.Name)
		case "UID":
			a.APIGroup, a.APIVersion, a.Resource = authenticationv1.GroupName, "v1", "uids"
			uid = ref.Name
		}
		if s.authz != nil {
			if d, reason := s.authz.Authorize(a); d != auth.DecisionAllow {
				return u, false, forbidden(a, reason)
			}
		}
	}
	if username != auth.Anonymous {
		// A non-anonymous user is in system:authenticated unless the
		// groups given say system:authenticated or system:unauthenticated.
		if !slices.Contains(groups, auth.AllAuthenticated) && !slices.Contains(groups, auth.AllUnauthenticated) {
			groups = append(groups, auth.AllAuthenticated)
		}
	} else if !slices.Contains(groups, auth.AllUnauthenticated) {
		groups = append(groups, auth.AllUnauthenticated)
	}
	req.Header.Del(authenticationv1.ImpersonateUserHeader)
	req.Header.Del(authenticationv1.ImpersonateGroupHeader)
	req.Header.Del(authenticationv1.ImpersonateUIDHeader)
	for name := range req.Header {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			req.Header.Del(name)
		}
	}
	return auth.User{Name: username, UID: uid, Groups: groups, Extra: extra}, true, nil
}

// impersonationRequests lists what the headers ask to impersonate, in
// kube-apiserver's order: the user, each group, each extra value, the
// uid. Groups, extras or a uid without a user are a 400, worded as
// kube-apiserver words it (the list printed with %v).
func impersonationRequests(h http.Header) ([]corev1.ObjectReference, error) {
	var refs []corev1.ObjectReference
	user := h.Get(authenticationv1.ImpersonateUserHeader)
	if user != "" {
		if ns, name, ok := splitServiceAccount(user); ok {
			refs = append(refs, corev1.ObjectReference{Kind: "ServiceAccount", Namespace: ns, Name: name})
		} else {
			refs = append(refs, corev1.ObjectReference{Kind: "User", Name: user})
		}
	}
	others := false
	for _, g := range h[authenticationv1.ImpersonateGroupHeader] {
		others = true
		refs = append(refs, corev1.ObjectReference{Kind: "Group", Name: g})
	}
	for name, values := range h {
		if !strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		others = true
		key := strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range values {
			refs = append(refs, corev1.ObjectReference{Kind: "UserExtra", APIVersion: authenticationv1.SchemeGroupVersion.String(), Name: v, FieldPath: key})
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		others = true
		refs = append(refs, corev1.ObjectReference{Kind: "UID", Name: uid, APIVersion: authenticationv1.SchemeGroupVersion.String()})
	}
	if others && user == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested %v without impersonating a user", refs))
	}
	return refs, nil
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
