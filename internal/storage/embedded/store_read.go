package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/leasehold/leasehold/internal/storage"
)

// Reads and durability. Pebble makes a batch visible to readers a moment
// before the fsync of its WAL returns, so a plain pebble read may see a
// write that is not durable yet (and that a crash would undo). Every read
// here therefore finds the newest revision its view may include and, if
// that revision is not committed yet, waits for the commit in flight (at
// most one fsync) before answering. If that commit fails, the read fails
// with the store.

// Get returns the current value of key. See storage.Interface. The value
// is a fresh copy.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if err := s.rlock(ctx); err != nil {
		return storage.KeyValue{}, err
	}
	kv, found, err := s.get(key)
	// Loaded after the read, applied bounds the revision of anything the
	// read may have seen: a delete in flight included.
	pending := s.applied.Load()
	s.mu.RUnlock()
	if err != nil {
		return storage.KeyValue{}, err
	}
	switch {
	case found && kv.ModRevision > pending:
		// Newer than anything the committer has numbered: the data on disk
		// disagrees with the stored revision. Waiting would never end.
		return storage.KeyValue{}, fmt.Errorf("embedded: get %q: %w: ModRevision %d above store revision %d", key, errCorrupt, kv.ModRevision, pending)
	case found && kv.ModRevision <= s.committed.Load():
		// This version is durable and was current when read: nothing
		// newer, acknowledged or not, had replaced it.
	case found:
		err = s.waitCommitted(ctx, kv.ModRevision)
	default:
		err = s.waitCommitted(ctx, pending)
	}
	if err != nil {
		return storage.KeyValue{}, err
	}
	if !found {
		return storage.KeyValue{}, errNotFound(key)
	}
	return kv, nil
}

func (s *Store) get(key string) (kv storage.KeyValue, found bool, err error) {
	if !strings.HasPrefix(key, dataStart) {
		return storage.KeyValue{}, false, nil
	}
	raw, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return storage.KeyValue{}, false, nil
	}
	if err != nil {
		return storage.KeyValue{}, false, fmt.Errorf("embedded: get %q: %w", key, err)
	}
	defer closer.Close()
	kv, err = decodeKV(key, raw)
	if err != nil {
		return storage.KeyValue{}, false, fmt.Errorf("embedded: get: %w", err)
	}
	return kv, true, nil
}

// List returns every key under prefix, in key order, from one pebble
// iterator (a consistent snapshot). Its Revision is the store revision
// stored in that same snapshot, so it is exact: every key is listed as of
// that revision. An empty prefix lists every key. The values are fresh
// copies.
func (s *Store) List(ctx context.Context, prefix string) (storage.ListResult, error) {
	if err := s.rlock(ctx); err != nil {
		return storage.ListResult{}, err
	}
	res, err := s.list(ctx, prefix)
	pending := s.applied.Load()
	s.mu.RUnlock()
	if err != nil {
		return storage.ListResult{}, err
	}
	if res.Revision > pending {
		return storage.ListResult{}, fmt.Errorf("embedded: list %q: %w: revision %d above %d", prefix, errCorrupt, res.Revision, pending)
	}
	if err := s.waitCommitted(ctx, res.Revision); err != nil {
		return storage.ListResult{}, err
	}
	return res, nil
}

func (s *Store) list(ctx context.Context, prefix string) (res storage.ListResult, err error) {
	lower := prefix
	if prefix == "" {
		lower = dataStart
	}
	// The revision key sorts below every data key, so one iterator covers
	// both; its lower bound is the revision key itself.
	var upper []byte
	if end, ok := storage.PrefixEnd(lower); ok {
		upper = []byte(end)
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: revisionKey, UpperBound: upper})
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("embedded: list %q: %w", prefix, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("embedded: list %q: %w", prefix, cerr)
		}
	}()
	if !it.SeekGE(revisionKey) || string(it.Key()) != string(revisionKey) {
		return storage.ListResult{}, fmt.Errorf("embedded: list %q: store revision missing: %w", prefix, errors.Join(errCorrupt, it.Error()))
	}
	raw, err := it.ValueAndErr()
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("embedded: list %q: %w", prefix, err)
	}
	if res.Revision, err = decodeRevision(raw); err != nil {
		return storage.ListResult{}, err
	}
	if !strings.HasPrefix(prefix, dataStart) && !strings.HasPrefix(dataStart, prefix) {
		return res, nil // no storage key can start with this prefix
	}
	for ok := it.SeekGE([]byte(lower)); ok; ok = it.Next() {
		raw, err := it.ValueAndErr()
		if err != nil {
			return storage.ListResult{}, fmt.Errorf("embedded: list %q: %w", prefix, err)
		}
		kv, err := decodeKV(string(it.Key()), raw)
		if err != nil {
			return storage.ListResult{}, fmt.Errorf("embedded: list: %w", err)
		}
		if kv.ModRevision > res.Revision {
			return storage.ListResult{}, fmt.Errorf("embedded: list: %w: %q at ModRevision %d above store revision %d", errCorrupt, kv.Key, kv.ModRevision, res.Revision)
		}
		res.KVs = append(res.KVs, kv)
	}
	if err := it.Error(); err != nil {
		return storage.ListResult{}, fmt.Errorf("embedded: list %q: %w", prefix, err)
	}
	return res, nil
}

// waitCommitted returns once revision rev is committed (durable), or with
// the store's error if it fails or closes first, or ctx's.
func (s *Store) waitCommitted(ctx context.Context, rev int64) error {
	for {
		// Take the channel before checking, so a commit in between is seen.
		_, notify := s.hist.state()
		if s.committed.Load() >= rev {
			return nil
		}
		select {
		case <-notify:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return s.Err()
		}
	}
}
