// Package admission holds the admission steps the registry runs on every
// write, as an explicit ordered list (a Chain), in the manner of
// kube-apiserver's admission plugins: a step sees the operation, the
// resource and the object, and may refuse the write. The registry runs
// the chain after a write's object is decoded and prepared, before it is
// stored.
//
// Steps in this package: NamespaceLifecycle, RBACEscalation,
// OwnerReferences.
package admission

import (
	"context"

	"github.com/leasehold/leasehold/internal/resources"
)

// Operation is what a write does to an object.
type Operation string

// Operations, as kube-apiserver's admission.Operation.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Request describes one write to admit.
type Request struct {
	Operation Operation
	Resource  resources.Resource
	// Namespace and Name identify the object (Namespace empty for
	// cluster-scoped kinds). On a create with generateName, Name is the
	// prefix.
	Namespace, Name string
	// Object is the object to store (storage version); nil on delete.
	// Old is the stored object; nil on create.
	Object, Old resources.Object
}

// Reader reads stored objects for admission steps that look at other
// objects (NamespaceLifecycle reads the namespace).
type Reader interface {
	// Get returns the current object, from the cache when it holds it,
	// else from a consistent read; the result is shared and must not be
	// modified.
	Get(ctx context.Context, res resources.Resource, namespace, name string) (resources.Object, error)
}

// Step is one admission step.
type Step interface {
	// Admit returns nil to let the write go on, or an API error
	// (k8s.io/apimachinery/pkg/api/errors) to refuse it.
	Admit(ctx context.Context, read Reader, req *Request) error
}

// Chain is an ordered list of steps.
type Chain []Step

// Admit runs every step in order; the first refusal ends the write.
func (c Chain) Admit(ctx context.Context, read Reader, req *Request) error {
	for _, s := range c {
		if err := s.Admit(ctx, read, req); err != nil {
			return err
		}
	}
	return nil
}
