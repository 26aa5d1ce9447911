package registry

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources"
)

// SystemNamespaces exist from the start, as in a Kubernetes cluster.
var SystemNamespaces = []string{
	metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease,
}

// EnsureNamespaces creates the system namespaces that do not exist.
func (r *Registry) EnsureNamespaces(ctx context.Context) error {
	for _, name := range SystemNamespaces {
		ns := r.namespaces.New()
		ns.SetName(name)
		_, err := r.Create(ctx, r.namespaces, "", ns, WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// RunNamespaceFinalizer does the namespace controller's part of deleting a
// namespace: it deletes everything in each terminating namespace, and once
// the namespace is empty removes the "kubernetes" finalizer, which lets the
// namespace go. It runs until ctx ends.
func (r *Registry) RunNamespaceFinalizer(ctx context.Context) error {
	c := r.cache(r.namespaces)
	var seen int64
	// pending says some namespace could not be finished (objects with
	// finalizers, or an error): look again after a pause even if nothing
	// changes.
	pending := false
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if pending {
			wctx, cancel = context.WithTimeout(ctx, time.Second)
		}
		s, err := c.WaitFor(wctx, seen+1)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s = c.Current()
		}
		seen, pending = s.Rev, false
		for _, o := range s.List(everything(), "", 0).Objects {
			ns := o.Obj.(*corev1.Namespace)
			if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				continue
			}
			done, err := r.finalizeNamespace(ctx, ns)
			if err != nil && ctx.Err() == nil {
				r.log.Warn("finalizing namespace", "namespace", ns.Name, "err", err)
			}
			pending = pending || !done || err != nil
		}
	}
}

// finalizeNamespace deletes the contents of ns and, when nothing is left,
// removes its "kubernetes" finalizer.
func (r *Registry) finalizeNamespace(ctx context.Context, ns *corev1.Namespace) (done bool, err error) {
	empty := true
	for res := range r.caches {
		if !res.Namespaced {
			continue
		}
		list, err := r.DeleteCollection(ctx, res, ns.Name, &metainternalversion.ListOptions{}, &metav1.DeleteOptions{})
		if err != nil {
			return false, err
		}
		// Objects held by finalizers are only marked; they keep the
		// namespace until their finalizers are gone.
		if len(list.Objects) > 0 {
			empty = r.namespaceEmpty(ctx, res, ns.Name) && empty
		}
	}
	if !empty {
		return false, nil
	}
	final := ns.DeepCopy()
	final.ResourceVersion = ""
	final.Spec.Finalizers = slices.DeleteFunc(final.Spec.Finalizers, func(f corev1.FinalizerName) bool {
		return f == corev1.FinalizerKubernetes
	})
	_, err = r.Update(ctx, r.namespaces, "", ns.Name, "finalize", final, WriteOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true, nil
	}
	return err == nil, err
}

func (r *Registry) namespaceEmpty(ctx context.Context, res *resources.Resource, namespace string) bool {
	list, err := r.List(ctx, res, namespace, &metainternalversion.ListOptions{Limit: 1})
	return err == nil && len(list.Objects) == 0
}
