package httpserver

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/internal/auth"
)

// requestContext is an authorized request's context: the one it came
// with, its deadline when that context does not carry it, and what was
// authorized, in one allocation. (A layer of context for each, and the
// copy of the request each needs, cost a renewal ~1.3 KB and a timer.)
//
// On HTTP/2 the context it wraps is the stream's, which timeoutInline
// ends at the deadline with the cause context.DeadlineExceeded; Err
// reports that as a passed deadline, as context.WithDeadline's would.
type requestContext struct {
	context.Context
	// deadline is the request's, when Context has none.
	deadline time.Time
	attrs    auth.Attributes
}

// newRequestContext is r's context over ctx, once r is authorized.
func newRequestContext(ctx context.Context, r *request) *requestContext {
	return &requestContext{Context: ctx, deadline: r.deadline, attrs: r.attrs}
}

func (c *requestContext) Deadline() (time.Time, bool) {
	if !c.deadline.IsZero() {
		return c.deadline, true
	}
	return c.Context.Deadline()
}

func (c *requestContext) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

func (c *requestContext) Value(key any) any {
	if key == auth.RequestKey {
		return c.attrs
	}
	return c.Context.Value(key)
}
