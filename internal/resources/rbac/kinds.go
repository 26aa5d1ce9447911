package rbac

import (
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// Every RBAC kind takes a PUT without resourceVersion and creates on PUT,
// as kube-apiserver's RBAC strategies allow.
var updates = resources.UpdatePolicy{AllowCreateOnUpdate: true, AllowUnconditionalUpdate: true}

var metadataFields = resources.Fields{Labels: resources.MetadataFields, Value: resources.MetadataField}

// NewRole returns the description of Roles.
func NewRole() *resources.Kind {
	return &resources.Kind{
		Names:      resources.Names{Kind: "Role", ListKind: "RoleList", Plural: "roles", Singular: "role"},
		Namespaced: true,
		KeyPath:    "roles",
		Versions: []resources.Version{{
			GroupVersion: rbacv1.SchemeGroupVersion,
			New:          func() resources.Object { return &rbacv1.Role{} },
			NewList:      func() runtime.Object { return &rbacv1.RoleList{} },
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{
			validate: func(obj resources.Object) field.ErrorList { return validateRole(obj.(*rbacv1.Role)) },
			validateUpdate: func(obj, old resources.Object) field.ErrorList {
				return validateRoleUpdate(obj.(*rbacv1.Role), old.(*rbacv1.Role))
			},
			namespaced: true,
		},
		Updates:     updates,
		Table:       defaultTable(),
		Fields:      metadataFields,
		ReadDecoded: true,
	}
}

// NewClusterRole returns the description of ClusterRoles.
func NewClusterRole() *resources.Kind {
	return &resources.Kind{
		Names:   resources.Names{Kind: "ClusterRole", ListKind: "ClusterRoleList", Plural: "clusterroles", Singular: "clusterrole"},
		KeyPath: "clusterroles",
		Versions: []resources.Version{{
			GroupVersion: rbacv1.SchemeGroupVersion,
			New:          func() resources.Object { return &rbacv1.ClusterRole{} },
			NewList:      func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{
			validate: func(obj resources.Object) field.ErrorList {
				return validateClusterRole(obj.(*rbacv1.ClusterRole), false)
			},
			validateUpdate: func(obj, old resources.Object) field.ErrorList {
				o := old.(*rbacv1.ClusterRole)
				return validateClusterRoleUpdate(obj.(*rbacv1.ClusterRole), o, hasInvalidLabelValueInSelector(o))
			},
		},
		Updates:     updates,
		Table:       defaultTable(),
		Fields:      metadataFields,
		ReadDecoded: true,
	}
}

// NewRoleBinding returns the description of RoleBindings.
func NewRoleBinding() *resources.Kind {
	return &resources.Kind{
		Names:      resources.Names{Kind: "RoleBinding", ListKind: "RoleBindingList", Plural: "rolebindings", Singular: "rolebinding"},
		Namespaced: true,
		KeyPath:    "rolebindings",
		Versions: []resources.Version{{
			GroupVersion: rbacv1.SchemeGroupVersion,
			New:          func() resources.Object { return &rbacv1.RoleBinding{} },
			NewList:      func() runtime.Object { return &rbacv1.RoleBindingList{} },
			Default: func(obj resources.Object) {
				b := obj.(*rbacv1.RoleBinding)
				defaultBinding(&b.RoleRef, b.Subjects)
			},
			OpenAPI: definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{
			validate: func(obj resources.Object) field.ErrorList { return validateRoleBinding(obj.(*rbacv1.RoleBinding)) },
			validateUpdate: func(obj, old resources.Object) field.ErrorList {
				return validateRoleBindingUpdate(obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding))
			},
			namespaced: true,
		},
		Updates: updates,
		Table: resources.Table{
			Columns: bindingColumns("roleBinding", rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]),
			Row: func(obj resources.Object, now time.Time) []any {
				b := obj.(*rbacv1.RoleBinding)
				return bindingRow(b.ObjectMeta, b.RoleRef, b.Subjects, now)
			},
		},
		Fields:      metadataFields,
		ReadDecoded: true,
	}
}

// NewClusterRoleBinding returns the description of ClusterRoleBindings.
func NewClusterRoleBinding() *resources.Kind {
	return &resources.Kind{
		Names:   resources.Names{Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList", Plural: "clusterrolebindings", Singular: "clusterrolebinding"},
		KeyPath: "clusterrolebindings",
		Versions: []resources.Version{{
			GroupVersion: rbacv1.SchemeGroupVersion,
			New:          func() resources.Object { return &rbacv1.ClusterRoleBinding{} },
			NewList:      func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			Default: func(obj resources.Object) {
				b := obj.(*rbacv1.ClusterRoleBinding)
				defaultBinding(&b.RoleRef, b.Subjects)
			},
			OpenAPI: definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{
			validate: func(obj resources.Object) field.ErrorList {
				return validateClusterRoleBinding(obj.(*rbacv1.ClusterRoleBinding))
			},
			validateUpdate: func(obj, old resources.Object) field.ErrorList {
				return validateClusterRoleBindingUpdate(obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding))
			},
		},
		Updates: updates,
		Table: resources.Table{
			Columns: bindingColumns("clusterRoleBinding", rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]),
			Row: func(obj resources.Object, now time.Time) []any {
				b := obj.(*rbacv1.ClusterRoleBinding)
				return bindingRow(b.ObjectMeta, b.RoleRef, b.Subjects, now)
			},
		},
		Fields:      metadataFields,
		ReadDecoded: true,
	}
}

// strategy holds the write rules of an RBAC kind: nothing is prepared or
// reset (kube-apiserver's RBAC strategies change nothing), and creates and
// updates are checked by the kind's validation, wrapped in the generic
// checks of kube-apiserver's rest package.
type strategy struct {
	resources.Unprepared
	resources.NoWarnings
	validate       func(obj resources.Object) field.ErrorList
	validateUpdate func(obj, old resources.Object) field.ErrorList
	namespaced     bool
}

func (s strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	return resources.ValidateCreate(obj, s.namespaced, s.validate(obj))
}

func (s strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return resources.ValidateUpdate(obj, s.namespaced, resources.CheckMetaUpdate(obj, old), s.validateUpdate(obj, old))
}

// defaultBinding is SetDefaults_RoleBinding (and ClusterRoleBinding) with
// SetDefaults_Subject: the roleRef's API group, and each user's and
// group's, default to rbac.authorization.k8s.io; a service account's stays
// empty.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// defaultTable is kube-apiserver's table for kinds without a printer
// (apiserver/pkg/registry/rest/table.go): the name and the creation time,
// as an RFC 3339 date.
func defaultTable() resources.Table {
	return resources.Table{
		Columns: []metav1.TableColumnDefinition{
			resources.NameColumn(),
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		},
		Row: func(obj resources.Object, _ time.Time) []any {
			return []any{obj.GetName(), obj.GetCreationTimestamp().UTC().Format(time.RFC3339)}
		},
	}
}

// bindingColumns are the columns of a binding's table; what names the
// kind in the wide columns' descriptions ("Users in the roleBinding").
// kube-apiserver describes the Role column with v1beta1's roleRef doc
// (without v1's "This field is immutable."), and so do we.
func bindingColumns(what, roleRefDoc string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		resources.NameColumn(),
		{Name: "Role", Type: "string", Description: roleRefDoc},
		resources.AgeColumn(),
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + what},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + what},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + what},
	}
}

// bindingRow is printRoleBinding's row: the role as Kind/name, the age,
// then the users, groups and service accounts (namespace/name) bound.
func bindingRow(meta metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []any{
		meta.Name, ref.Kind + "/" + ref.Name, resources.Age(meta.CreationTimestamp, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", "),
	}
}
