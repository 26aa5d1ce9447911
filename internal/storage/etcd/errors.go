package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold/internal/storage"
)

// mapErr turns an etcd client error of the request op, made with ctx (from
// begin), into the storage contract's errors; see the package documentation.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	// The context says best why a request ended early: the store closing,
	// our request timeout, or the caller.
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case s.ctx.Err() != nil || errors.Is(cause, errClosed):
			return fmt.Errorf("etcd: %s: %w", op, errClosed)
		case errors.Is(cause, errRequestTimeout):
			return fmt.Errorf("etcd: %s: no answer within %v: %w (%w)", op, s.opts.RequestTimeout, storage.ErrUnavailable, context.DeadlineExceeded)
		case errors.Is(cause, context.DeadlineExceeded):
			return fmt.Errorf("etcd: %s: no answer before the deadline: %w (%w)", op, storage.ErrUnavailable, context.DeadlineExceeded)
		default:
			return fmt.Errorf("etcd: %s: %w", op, ctx.Err())
		}
	}
	err = wrapErr(op, err)
	s.noteErr(err)
	return err
}

// wrapErr maps an error that is not explained by the request's context.
func wrapErr(op string, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrCompacted)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("etcd: %s: %w: %v", op, storage.ErrTooLarge, err)
	case errors.Is(err, rpctypes.ErrNoSpace):
		// etcd's quota (--quota-backend-bytes) is reached and its NOSPACE
		// alarm raised: it serves reads and deletes only, until an
		// operator compacts, defragments and disarms the alarm. Clients
		// get etcd's words, as kube-apiserver passes them through. The
		// write that crossed the quota was applied nonetheless
		// (etcdserver/apply/quota.go): its outcome, like a timeout's, is
		// unknown to the caller.
		return fmt.Errorf("etcd: %s: %w", op, &storage.NoSpaceError{Message: rpctypes.ErrorDesc(err)})
	case errors.Is(err, rpctypes.ErrTooManyRequests):
		return fmt.Errorf("etcd: %s: %w: %v", op, storage.ErrUnavailable, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("etcd: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	switch grpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		// No connection, a member stopping, no leader, a leader change, a
		// server-side request timeout.
		return fmt.Errorf("etcd: %s: %w: %v", op, storage.ErrUnavailable, err)
	case codes.ResourceExhausted:
		// gRPC's message size limits, on either side ("trying to send
		// message larger than max", "received message larger than max").
		return fmt.Errorf("etcd: %s: %w: %v", op, storage.ErrTooLarge, err)
	}
	return fmt.Errorf("etcd: %s: %w", op, err)
}

// grpcCode is the gRPC code of an etcd or gRPC error, codes.Unknown for
// others.
func grpcCode(err error) codes.Code {
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Code()
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return codes.Unknown
}
