package etcd

import (
	"bytes"
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/storage"
)

// Put stores value under key if the key's ModRevision is expected (0: the
// key must not exist), in one transaction that, when the comparison fails,
// reads the current value instead. See storage.Interface and the package
// documentation.
//
// A value written WithTTL is attached to an etcd lease, shared with other
// keys written about then (see lease.go), as kube-apiserver attaches
// Events: etcd deletes the key when the lease expires, and tools reading
// etcd see the lease.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected int64, opts ...storage.PutOption) (storage.KeyValue, error) {
	// The name of the request, for errors only: formatting it costs.
	op := func() string { return fmt.Sprintf("put %q", key) }
	if expected < 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: negative expected revision %d", op(), expected)
	}
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: %w", op(), err)
	}
	defer end()
	if len(value) > s.opts.MaxValueSize {
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: %w: %d bytes, at most %d", op(), storage.ErrTooLarge, len(value), s.opts.MaxValueSize)
	}

	var putOpts []clientv3.OpOption
	if o := storage.NewPutOptions(opts); o.TTL > 0 {
		id, err := s.leases.get(ctx, o.TTL)
		if err != nil {
			return storage.KeyValue{}, s.mapErr(ctx, op()+": granting a lease", err)
		}
		putOpts = append(putOpts, clientv3.WithLease(id))
	}
	// string(value) copies the caller's buffer before the request is built.
	then := []clientv3.Op{clientv3.OpPut(key, string(value), putOpts...)}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if expected != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", expected)
	}
	start, opName := time.Now(), "create"
	if expected != 0 {
		opName = "update"
	}
	resp, err := s.client.Txn(ctx).If(cmp).Then(then...).Else(clientv3.OpGet(key)).Commit()
	s.observe(opName, key, start)
	if err != nil {
		return storage.KeyValue{}, s.mapErr(ctx, op(), err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, conflict(key, expected, resp)
	}
	rev := resp.Header.Revision
	kv := storage.KeyValue{Key: key, Value: bytes.Clone(value), ModRevision: rev}
	if expected == 0 {
		kv.CreateRevision = rev
	}
	// An update's CreateRevision stays 0 (unknown): learning it would take
	// a read in the transaction, costing etcd a backend read and a longer
	// answer a renewal, for a field no caller uses (see storage.Interface).
	s.progress.want(rev, false)
	return kv, nil
}

// Delete removes key if its ModRevision is expected, in one transaction that
// returns the deleted value, or, when the comparison fails, the current
// one. See storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, error) {
	op := func() string { return fmt.Sprintf("delete %q", key) }
	if expected <= 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: expected revision %d is not positive", op(), expected)
	}
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: %w", op(), err)
	}
	defer end()
	defer s.observe("delete", key, time.Now())
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expected)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return storage.KeyValue{}, s.mapErr(ctx, op(), err)
	}
	if !resp.Succeeded {
		ce := conflict(key, expected, resp)
		if ce.Current == nil {
			return storage.KeyValue{}, fmt.Errorf("etcd: %s: %w", op(), storage.ErrNotFound)
		}
		return storage.KeyValue{}, ce
	}
	rev := resp.Header.Revision
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) != 1 {
		// Cannot happen: the comparison saw the key at expected > 0.
		return storage.KeyValue{}, fmt.Errorf("etcd: %s: the delete at %d returned %d previous values", op(), rev, len(prev))
	}
	s.progress.want(rev, false)
	return storage.KeyValue{Key: key, Value: prev[0].Value, CreateRevision: prev[0].CreateRevision, ModRevision: rev}, nil
}

// conflict builds the *storage.ConflictError of a transaction whose
// comparison failed, from the read in its else branch.
func conflict(key string, expected int64, resp *clientv3.TxnResponse) *storage.ConflictError {
	ce := &storage.ConflictError{Key: key, Expected: expected}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		cur := keyValue(kvs[0])
		ce.Current = &cur
	}
	return ce
}
