// Package rbac describes the four kinds of rbac.authorization.k8s.io/v1 as
// kube-apiserver serves them: Roles and RoleBindings (namespaced),
// ClusterRoles and ClusterRoleBindings. Validation is
// pkg/apis/rbac/validation (v1.36), the defaults of roleRef and subjects
// pkg/apis/rbac/v1/defaults.go, the update rules
// pkg/registry/rbac/*/strategy.go, and the tables
// pkg/printers/internalversion/printers.go for bindings and apiserver's
// default table (Name, Created At) for roles, which have no printer.
//
// What these objects mean (who may do what) is package internal/rbac's;
// who may write them (escalation prevention) is an admission step.
package rbac
