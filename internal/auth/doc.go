// Package auth decides who a client is and what it may do, with
// kube-apiserver's formats and rules.
//
// Authentication (Authenticator) tries, in kube-apiserver's order:
//   - x509 client certificates that chain to a trusted CA (X509, CABundle):
//     the common name is the user, the organizations its groups;
//   - bearer tokens from a static token file in kube-apiserver's
//     --token-auth-file CSV format (TokenFile);
//   - anonymous requests, when enabled: user system:anonymous in group
//     system:unauthenticated.
//
// A credential that is presented but not valid fails the request even
// when anonymous requests are allowed, and every authenticated user gets
// the group system:authenticated, as kube-apiserver's authenticator chain
// does (k8s.io/kubernetes/pkg/kubeapiserver/authenticator/config.go).
//
// Authorization (Authorizer) is kube-apiserver's chain: the system:masters
// group may do everything, then each Mode of --authorization-mode is asked
// in order until one allows: RBAC (package internal/rbac), ABAC over a
// policy file in kube-apiserver's --authorization-policy-file format
// (PolicyFile), AlwaysAllow. Without RBAC, DefaultRules gives every user
// what kube-apiserver's default RBAC bindings give (discovery, health,
// version, and the self reviews).
//
// What a request asks, and the user it is made as, travel in its context
// (under RequestKey; RequestFrom, UserFrom) to the checks that need them
// beyond the authorizer: RBAC escalation prevention.
//
// The token file, the client CA file and the policy file are re-read when
// they change (Run polls them); a file that no longer parses is logged and
// the previous content stays in force.
package auth
