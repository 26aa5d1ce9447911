// Package namespace is the namespace controller: it finishes the deletion
// of namespaces, the work kube-controller-manager's namespace controller
// does in a Kubernetes cluster. For each terminating namespace it deletes
// everything in it and, once nothing is left, removes the "kubernetes"
// finalizer, which lets the namespace go. It also creates the system
// namespaces a cluster starts with.
package namespace

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// SystemNamespaces exist from the start, as in a Kubernetes cluster.
var SystemNamespaces = []string{
	metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease,
}

// recheck is how long the controller waits before looking again at a
// namespace it could not finish (objects held by finalizers, an error),
// when nothing else changes meanwhile.
const recheck = time.Second

// manager is the field manager of the controller's writes.
const manager = "leasehold"

// EnsureSystem creates the system namespaces that do not exist.
func EnsureSystem(ctx context.Context, reg *registry.Registry) error {
	namespaces, err := namespaceResource(reg)
	if err != nil {
		return err
	}
	for _, name := range SystemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := reg.Create(ctx, namespaces, "", ns, registry.WriteOptions{Manager: manager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func namespaceResource(reg *registry.Registry) (resources.Resource, error) {
	res, ok := reg.ResourceFor(schema.GroupKind{Kind: "Namespace"})
	if !ok {
		return res, errors.New("namespaces are not served")
	}
	return res, nil
}

// New returns the controller.
func New(reg *registry.Registry, log *slog.Logger) controllers.Controller {
	return controllers.Controller{
		Name:      "namespace",
		Singleton: true,
		Run: func(ctx context.Context) error {
			namespaces, err := namespaceResource(reg)
			if err != nil {
				return err
			}
			c := &controller{reg: reg, log: log, namespaces: namespaces, now: time.Now}
			return c.run(ctx)
		},
	}
}

type controller struct {
	reg        *registry.Registry
	log        *slog.Logger
	namespaces resources.Resource
	now        func() time.Time
}

// run lists the namespaces, finishes what it can, and waits for a change
// (or, when a namespace is left unfinished, at most recheck) before
// looking again.
func (c *controller) run(ctx context.Context) error {
	for {
		list, err := c.reg.List(ctx, c.namespaces, "", &metainternalversion.ListOptions{})
		if err != nil {
			return err
		}
		pending := false
		for _, item := range list.Items {
			ns := item.Object().(*corev1.Namespace)
			if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				continue
			}
			done, err := c.finalize(ctx, ns)
			if err != nil && ctx.Err() == nil {
				c.log.Warn("finalizing namespace", "namespace", ns.Name, "err", err)
			}
			pending = pending || !done || err != nil
		}
		wait := time.Duration(0)
		if pending {
			wait = recheck
		}
		if err := controllers.WaitForChange(ctx, c.reg, c.namespaces, list.ResourceVersion, wait); err != nil {
			return err
		}
	}
}

// finalize deletes the contents of ns, says in the namespace's status
// conditions what is left and why, and, when nothing is left, removes its
// "kubernetes" finalizer.
func (c *controller) finalize(ctx context.Context, ns *corev1.Namespace) (done bool, err error) {
	var left remaining
	for _, k := range c.reg.Kinds() {
		if !k.Namespaced {
			continue
		}
		res := k.Storage()
		if _, err := c.reg.DeleteCollection(ctx, res, ns.Name, &metainternalversion.ListOptions{}, &metav1.DeleteOptions{}); err != nil {
			if ctx.Err() != nil {
				return false, err
			}
			left.failures = append(left.failures, err.Error())
			continue
		}
		// Objects held by finalizers are only marked; they keep the
		// namespace until their finalizers are gone.
		list, err := c.reg.List(ctx, res, ns.Name, &metainternalversion.ListOptions{})
		if err != nil {
			left.failures = append(left.failures, err.Error())
			continue
		}
		left.add(res, list.Items)
	}
	if err := c.setConditions(ctx, ns, left.conditions(c.now())); err != nil && ctx.Err() == nil {
		c.log.Warn("updating the conditions of a terminating namespace", "namespace", ns.Name, "err", err)
	}
	if !left.empty() {
		return false, nil
	}
	final := ns.DeepCopy()
	final.ResourceVersion = ""
	final.Spec.Finalizers = slices.DeleteFunc(final.Spec.Finalizers, func(f corev1.FinalizerName) bool {
		return f == corev1.FinalizerKubernetes
	})
	_, err = c.reg.Update(ctx, c.namespaces, "", ns.Name, "finalize", final, registry.WriteOptions{Manager: manager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true, nil
	}
	return err == nil, err
}

// setConditions writes the namespace's deletion conditions when they
// change, through the status subresource, as kube-controller-manager's
// namespace controller does. A conflict is left to the next round.
func (c *controller) setConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) error {
	status := *ns.Status.DeepCopy()
	if !mergeConditions(&status, conds, c.now()) {
		return nil
	}
	updated := ns.DeepCopy()
	updated.Status = status
	_, err := c.reg.Update(ctx, c.namespaces, "", ns.Name, "status", updated, registry.WriteOptions{Manager: manager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
