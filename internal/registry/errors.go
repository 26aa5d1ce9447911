package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage"
)

// waitTimeout bounds how long a read waits for the cache to reach a
// revision, as kube-apiserver's cacher does.
const waitTimeout = 3 * time.Second

// optimisticLockMessage is kube-apiserver's conflict detail
// (apiserver/pkg/registry/generic/registry/store.go OptimisticLockErrorMsg).
const optimisticLockMessage = "the object has been modified; please apply your changes to the latest version and try again"

// storageError turns a storage failure into an API error; verb names the
// operation in ServerTimeout answers.
// Status codes of the errors the registry makes itself (metav1.Status's
// Code: the registry knows no HTTP, only what kube-apiserver answers).
const (
	codeUnprocessable = 422
	codeInternalError = 500
)

func storageError(err error, res resources.Resource, name, verb string) error {
	var se *apierrors.StatusError
	var noSpace *storage.NoSpaceError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &noSpace):
		// kube-apiserver passes etcd's "mvcc: database space exceeded"
		// through as an error that is not a Status: a 500 without a
		// reason, with the error's text as message (apiserver's
		// responsewriters.ErrorToAPIStatus). No Retry-After: retrying
		// does not help until an operator acts.
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    codeInternalError,
			Reason:  metav1.StatusReasonUnknown,
			Message: noSpace.Message,
		}}
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(res.GroupResource(), name)
	case errors.Is(err, storage.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the object %q is larger than the store accepts", name))
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, storage.ErrUnavailable):
		// The request's own deadline passed while the engine worked (a
		// slow disk): the 504 of kube-apiserver's handlers, which the
		// HTTP layer gives a bare deadline error.
		return err
	case errors.Is(err, storage.ErrUnavailable):
		return apierrors.NewServerTimeout(res.GroupResource(), verb, 2)
	case errors.Is(err, context.Canceled):
		return err
	default:
		return apierrors.NewInternalError(err)
	}
}
