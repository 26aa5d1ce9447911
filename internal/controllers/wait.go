package controllers

import (
	"context"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// WaitForChange returns once an object of res changes after revision
// rev, or, with retry above zero, after retry at the latest: a controller
// that could not finish looks again then even if nothing changes. A
// watch that ends, falls behind or starts too far back also returns, for
// the controller to list again. It fails only with ctx or the registry.
func WaitForChange(ctx context.Context, reg *registry.Registry, res resources.Resource, rev int64, retry time.Duration) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if retry > 0 {
		wctx, cancel = context.WithTimeout(ctx, retry)
	}
	defer cancel()
	w, err := reg.Watch(wctx, res, "", "", &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(rev, 10)})
	if err != nil {
		if apierrors.IsResourceExpired(err) || wctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	defer w.Stop()
	for {
		events, err := w.Next(wctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil, len(events) > 0:
			// A change, the retry's time, the watch's end, or a watch
			// that fell behind: look again.
			return nil
		}
	}
}
