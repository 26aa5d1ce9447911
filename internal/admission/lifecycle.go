package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources"
)

// NamespaceLifecycle is kube-apiserver's admission plugin of that name
// (apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go): an
// object may be created only in an existing namespace (404) that is not
// terminating (403), and the namespaces a cluster keeps cannot be
// deleted. Updates and reads are never refused.
type NamespaceLifecycle struct {
	// Namespaces is the namespace kind.
	Namespaces resources.Resource
}

// immortalNamespaces cannot be deleted.
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true,
	metav1.NamespaceSystem:  true,
	metav1.NamespacePublic:  true,
}

// Admit implements Step.
func (l NamespaceLifecycle) Admit(ctx context.Context, read Reader, req *Request) error {
	switch {
	case req.Operation == Delete && req.Resource.Kind == l.Namespaces.Kind:
		if immortalNamespaces[req.Name] {
			return apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf("this namespace may not be deleted"))
		}
	case req.Operation == Create && req.Resource.Kind.Namespaced:
		obj, err := read.Get(ctx, l.Namespaces, "", req.Namespace)
		if err != nil {
			return err
		}
		if obj.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating {
			return nil
		}
		se := apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", req.Namespace))
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    corev1.NamespaceTerminatingCause,
			Message: fmt.Sprintf("namespace %s is being terminated", req.Namespace),
			Field:   "metadata.namespace",
		})
		return se
	}
	return nil
}
