package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
func storageError(err error, res resources.Resource, name, verb string) error {
	var se *apierrors.StatusError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(res.GroupResource(), name)
	case errors.Is(err, storage.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the object %q is larger than the store accepts", name))
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewServerTimeout(res.GroupResource(), verb, 2)
	case errors.Is(err, context.Canceled):
		return err
	default:
		return apierrors.NewInternalError(err)
	}
}
