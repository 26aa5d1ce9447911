package httpserver

import (
	"context"

	"github.com/leasehold/leasehold/internal/auth"
)

// requestContext is an authorized request's context: the one it came
// with (with its deadline: withDeadline) and what was authorized, in one
// allocation. (A layer of context for the attributes, and the copy of the
// request it needs, cost a renewal ~0.3 KB.)
type requestContext struct {
	context.Context
	attrs auth.Attributes
}

// newRequestContext is r's context over ctx, once r is authorized.
func newRequestContext(ctx context.Context, call *request) *requestContext {
	return &requestContext{Context: ctx, attrs: call.attrs}
}

func (c *requestContext) Value(key any) any {
	if key == auth.RequestKey {
		return &c.attrs
	}
	return c.Context.Value(key)
}
