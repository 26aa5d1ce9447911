package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources"
)

// immortalNamespaces cannot be deleted, as in kube-apiserver's
// NamespaceLifecycle admission plugin.
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true,
	metav1.NamespaceSystem:  true,
	metav1.NamespacePublic:  true,
}

// admitCreate applies kube-apiserver's NamespaceLifecycle rules to a
// create: the namespace must exist (404) and not be terminating (403)
// (apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go).
func (r *Registry) admitCreate(ctx context.Context, res *resources.Resource, obj resources.Object) error {
	if !res.Namespaced || r.namespaces == nil {
		return nil
	}
	name := obj.GetNamespace()
	// The cache answers for existing namespaces; a miss is checked with a
	// consistent read, so a namespace created just before is found.
	ns, ok := r.cachedObject(r.namespaces, r.key(r.namespaces, "", name))
	if !ok {
		o, err := r.Get(ctx, r.namespaces, "", name, "")
		if err != nil {
			return err
		}
		ns = o.Obj
	}
	if ns.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	objName := obj.GetName()
	if objName == "" {
		objName = obj.GetGenerateName()
	}
	se := apierrors.NewForbidden(res.GroupResource(), objName, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", name))
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", name),
		Field:   "metadata.namespace",
	})
	return se
}

// admitDelete refuses to delete the namespaces kube-apiserver keeps.
func (r *Registry) admitDelete(res *resources.Resource, name string) error {
	if res == r.namespaces && immortalNamespaces[name] {
		return apierrors.NewForbidden(res.GroupResource(), name, fmt.Errorf("this namespace may not be deleted"))
	}
	return nil
}
