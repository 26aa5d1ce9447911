package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/admission"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// DeleteResult is the outcome of a delete.
type DeleteResult struct {
	// Object (storage version) is the object as stored before the delete,
	// or, when Deleted is false, as it now waits for its finalizers.
	Object resources.Object
	// Deleted is true when the object is gone.
	Deleted bool
}

// Delete deletes an object. An object that must wait (metadata.finalizers
// not empty, or what its kind's Finalization holds) is only marked with a
// deletionTimestamp; it goes when nothing holds it any more.
//
// propagationPolicy and orphanDependents add or remove the garbage
// collector's finalizers first (gcFinalizers): foreground and orphan
// deletions wait for the collector, background ones leave it the
// dependents.
func (r *Registry) Delete(ctx context.Context, res resources.Resource, namespace, name string, opts *metav1.DeleteOptions) (DeleteResult, error) {
	if err := r.admit(ctx, admission.Delete, res, namespace, name, nil, nil); err != nil {
		return DeleteResult{}, err
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return DeleteResult{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	dryRun := len(opts.DryRun) > 0
	key := r.key(res.Kind, namespace, name)
	cur, err := r.storedCurrent(ctx, res, key, name)
	if err != nil {
		return DeleteResult{}, err
	}
	for {
		if cur == nil {
			return DeleteResult{}, apierrors.NewNotFound(res.GroupResource(), name)
		}
		if err := checkPreconditions(res, cur.obj, opts.Preconditions); err != nil {
			return DeleteResult{}, err
		}
		if _, change := gcFinalizers(cur.obj, opts); change || mustWait(res.Kind, cur.obj) {
			return r.markDeleting(ctx, res, key, name, cur.obj.GetUID(), opts, dryRun)
		}
		if dryRun {
			return DeleteResult{Object: cur.obj, Deleted: true}, nil
		}
		kv, err := r.store.Delete(ctx, key, cur.rev)
		if err == nil {
			r.state[res.Kind].owners.set(key, 0, false)
			// cur was decoded from storage for this call (storedCurrent,
			// fromConflict): it is ours to change.
			cur.obj.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
			return DeleteResult{Object: cur.obj, Deleted: true}, nil
		}
		var ce *storage.ConflictError
		switch {
		case errors.As(err, &ce):
			if cur, err = r.fromConflict(res.Kind, ce); err != nil {
				return DeleteResult{}, err
			}
		case errors.Is(err, storage.ErrNotFound):
			cur = nil
		default:
			return DeleteResult{}, storageError(err, res, name, "delete")
		}
	}
}

// mustWait reports whether a delete may only mark obj.
func mustWait(k *resources.Kind, obj resources.Object) bool {
	return len(obj.GetFinalizers()) > 0 || k.Finalization != nil && k.Finalization.Holds(obj)
}

// markDeleting marks an object that must wait as being deleted; uid is
// the object's as the delete first read it, so that a delete racing with
// a re-creation does not mark the new object. If nothing holds the object
// once marked, it goes at once.
func (r *Registry) markDeleting(ctx context.Context, res resources.Resource, key, name string, uid types.UID, opts *metav1.DeleteOptions, dryRun bool) (DeleteResult, error) {
	out, err := r.guaranteedUpdate(ctx, res, key, name, 0, dryRun, func(existing *current) (*attempt, error) {
		if existing == nil {
			return nil, apierrors.NewNotFound(res.GroupResource(), name)
		}
		if existing.obj.GetUID() != uid {
			return nil, apierrors.NewConflict(res.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, existing.obj.GetUID()))
		}
		if err := checkPreconditions(res, existing.obj, opts.Preconditions); err != nil {
			return nil, err
		}
		obj := existing.obj.DeepCopyObject().(resources.Object)
		obj.SetResourceVersion("")
		if fs, change := gcFinalizers(obj, opts); change {
			obj.SetFinalizers(fs)
		}
		if f := res.Kind.Finalization; f != nil {
			f.MarkDeleting(obj, r.now())
		} else {
			markDeleting(obj, r.now())
		}
		return &attempt{obj: obj}, nil
	})
	if err != nil {
		return DeleteResult{}, err
	}
	return DeleteResult{Object: out.obj, Deleted: out.deleted}, nil
}

// gcFinalizers returns the finalizers obj must have for a delete with
// opts, and whether they differ from its own: orphan for an orphaning
// delete, foregroundDeletion for a foreground one, neither for a
// background one, and those obj already has when opts say nothing
// (kube-apiserver's deletionFinalizersForGarbageCollection). Every kind
// leasehold serves has kube-apiserver's default policy, background.
func gcFinalizers(obj resources.Object, opts *metav1.DeleteOptions) ([]string, bool) {
	had := obj.GetFinalizers()
	hadOrphan, hadForeground := slices.Contains(had, metav1.FinalizerOrphanDependents), slices.Contains(had, metav1.FinalizerDeleteDependents)
	orphan, foreground := hadOrphan, !hadOrphan && hadForeground
	switch {
	case opts.OrphanDependents != nil: //nolint:staticcheck // still honoured, as by kube-apiserver
		orphan, foreground = *opts.OrphanDependents, false //nolint:staticcheck
	case opts.PropagationPolicy != nil:
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan:
			orphan, foreground = true, false
		case metav1.DeletePropagationForeground:
			orphan, foreground = false, true
		case metav1.DeletePropagationBackground:
			orphan, foreground = false, false
		}
	}
	// The others stay as they are: the set changes only with these two.
	if orphan == hadOrphan && foreground == hadForeground {
		return had, false
	}
	fs := slices.DeleteFunc(slices.Clone(had), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	if orphan {
		fs = append(fs, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		fs = append(fs, metav1.FinalizerDeleteDependents)
	}
	return fs, true
}

// markDeleting sets the deletion fields of an object held by finalizers
// (apiserver/pkg/registry/generic/registry/store.go markAsDeleting).
func markDeleting(obj resources.Object, now time.Time) {
	if obj.GetDeletionTimestamp() == nil && obj.GetGeneration() > 0 {
		obj.SetGeneration(obj.GetGeneration() + 1)
	}
	if ts := obj.GetDeletionTimestamp(); ts == nil || ts.After(now) {
		t := metav1.NewTime(now.Truncate(time.Second))
		obj.SetDeletionTimestamp(&t)
	}
	zero := int64(0)
	obj.SetDeletionGracePeriodSeconds(&zero)
}

// checkPreconditions compares DeleteOptions preconditions with the stored
// object. kube-apiserver names the kind, not the resource, in this
// conflict (apiserver/pkg/registry/rest/delete.go BeforeDelete).
func checkPreconditions(res resources.Resource, obj resources.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	gr := schema.GroupResource{Group: res.Version.Group, Resource: res.Kind.Names.Kind}
	if p.UID != nil && *p.UID != obj.GetUID() {
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, obj.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != obj.GetResourceVersion() {
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, obj.GetResourceVersion()))
	}
	return nil
}

// DeleteCollection deletes every object a list with opts selects, one by
// one with the same delete options, and returns the list as it was before
// (kube-apiserver's semantics: not atomic, objects already gone are
// skipped).
func (r *Registry) DeleteCollection(ctx context.Context, res resources.Resource, namespace string, listOpts *metainternalversion.ListOptions, opts *metav1.DeleteOptions) (*ListResult, error) {
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	list, err := r.List(ctx, res, namespace, listOpts)
	if err != nil {
		return nil, err
	}
	for _, o := range list.Items {
		obj := o.Object()
		_, err := r.Delete(ctx, res, obj.GetNamespace(), obj.GetName(), opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return list, nil
}
