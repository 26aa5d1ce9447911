// Package rbac is what Roles and bindings mean, as kube-apiserver's RBAC
// authorizer and its escalation checks read them:
//
//   - Resolver finds the rules that apply to a user in a namespace (every
//     ClusterRoleBinding, then the namespace's RoleBindings, each subject
//     matched as a user, a group or a service account), from a Source of
//     stored objects (pkg/registry/rbac/validation/rule.go);
//   - Authorizer is the RBAC authorization mode: a request is allowed when
//     one of those rules matches its verb, API group, resource and
//     subresource, name, or path ("*" everywhere), and otherwise it has no
//     opinion (plugin/pkg/auth/authorizer/rbac/rbac.go);
//   - ConfirmNoEscalation refuses to let a user grant what they do not
//     hold, with kube-apiserver's message;
//   - Aggregate computes the rules of an aggregated ClusterRole
//     (pkg/controller/clusterroleaggregation);
//   - ClusterRoles and ClusterRoleBindings are the bootstrap policy
//     leasehold keeps, kube-apiserver's for what it serves
//     (plugin/pkg/auth/authorizer/rbac/bootstrappolicy).
//
// The coverage check of escalation is k8s.io/component-helpers'
// validation.Covers; the rest has no library outside k8s.io/kubernetes.
// The package reads objects through Source and writes none: the server
// provides a Source over the registry's caches.
package rbac
