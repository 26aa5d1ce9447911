package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// checkEvery is how many records a snapshot writes between looks at its
// contexts.
const checkEvery = 1024

// Snapshot writes a snapshot of the whole store to w, in the format of
// snapshot.go, and returns what it wrote. It is consistent at one
// revision (SnapshotInfo.Revision): every write acknowledged before the
// call is in it. It takes a pebble snapshot, which costs no more than a
// read and never blocks the committer, so writes go on while it streams;
// pebble keeps the files the snapshot needs until it ends. It stops with
// ctx's error when ctx ends, and with the store's when the store fails
// or closes (Close waits for it). On an error, w has received part of a
// snapshot, which CheckSnapshot and Restore refuse.
func (s *Store) Snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	if err := s.rlock(ctx); err != nil {
		return SnapshotInfo{}, err
	}
	snap := s.db.NewSnapshot()
	// Loaded after the snapshot, applied bounds what it may hold.
	pending := s.applied.Load()
	// Added under the read lock: Close has not begun waiting.
	s.snapshots.Add(1)
	s.mu.RUnlock()
	defer s.snapshots.Done()
	defer snap.Close()

	raw, closer, err := snap.Get(revisionKey)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: snapshot: store revision: %w", err)
	}
	rev, err := decodeRevision(raw)
	closer.Close()
	if err != nil {
		return SnapshotInfo{}, err
	}
	if rev > pending {
		return SnapshotInfo{}, fmt.Errorf("embedded: snapshot: %w: revision %d above %d", errCorrupt, rev, pending)
	}
	// Pebble shows a batch before its fsync returns: the snapshot may
	// hold the batch being committed, which must be durable first.
	if err := s.waitCommitted(ctx, rev); err != nil {
		return SnapshotInfo{}, err
	}

	sw, err := newSnapshotWriter(w, rev)
	if err != nil {
		return SnapshotInfo{}, err
	}
	it, err := snap.NewIter(nil)
	if err != nil {
		return SnapshotInfo{}, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if sw.keys%checkEvery == 0 {
			if err := s.check(ctx); err != nil {
				it.Close()
				return SnapshotInfo{}, err
			}
		}
		v, err := it.ValueAndErr()
		if err == nil {
			err = sw.record(it.Key(), v)
		}
		if err != nil {
			it.Close()
			return SnapshotInfo{}, fmt.Errorf("embedded: snapshot: %w", err)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: snapshot: %w", err)
	}
	info, err := sw.finish()
	info.Revision = rev
	return info, err
}

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// BumpRevision is added to the store revision of the restored store
	// (not to the revisions of its keys, which stay the objects'
	// resourceVersions). See Restore.
	BumpRevision int64
	// Logger receives pebble's messages. Default: discard.
	Logger *slog.Logger
}

// Restore creates a store in dir, which must not exist, from the snapshot
// read from r. The snapshot is checked as it is read; if it is truncated
// or corrupt, or holds what no store holds, Restore removes dir and
// returns an error wrapping ErrBadSnapshot. Every key keeps its revisions,
// so every object keeps its resourceVersion.
//
// The store revision becomes the snapshot's plus opts.BumpRevision. The
// event history starts empty at Open, so a watch from any revision below
// it fails as compacted and its client lists again; bumping past every
// revision the old store may have reached after the snapshot makes that
// true of every resourceVersion a client may hold (etcdutl snapshot
// restore's --bump-revision, with --mark-compacted).
func Restore(r io.Reader, dir string, opts RestoreOptions) (info SnapshotInfo, err error) {
	if opts.BumpRevision < 0 {
		return SnapshotInfo{}, errors.New("embedded: restore: negative revision bump")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w", err)
	}
	db, err := openPebble(dir, &pebble.Options{
		FormatMajorVersion: pebble.FormatTableFormatV6,
		Logger:             &pebbleLogger{log: opts.Logger, fail: func(error) {}},
		// Nothing is durable before the final Flush, and nothing needs
		// to be: a failed restore removes dir.
		DisableWAL: true,
	})
	if err != nil {
		os.RemoveAll(dir)
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w", err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("embedded: restore: %w", cerr)
		}
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	// Runs before the deferred close, which then sees the error.
	defer recoverFatal(&err)

	var format string
	b := db.NewBatch()
	defer func() { b.Close() }()
	info, err = readSnapshot(r, func(rev int64, key, value []byte) error {
		if err := checkRestoredKey(key, value, rev, &format); err != nil {
			return err
		}
		if err := b.Set(key, value, nil); err != nil {
			return err
		}
		if b.Len() >= maxBatchBytes {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			b.Close()
			b = db.NewBatch()
		}
		return nil
	})
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w", err)
	}
	if format == "" {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w: no store format marker", ErrBadSnapshot)
	}
	rev := info.Revision
	if opts.BumpRevision > math.MaxInt64/2-rev {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: revision bump %d too large", opts.BumpRevision)
	}
	if err := b.Set(revisionKey, encodeRevision(rev+opts.BumpRevision), nil); err != nil {
		return SnapshotInfo{}, err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w", err)
	}
	// Flush writes the memtables to tables and syncs them and the
	// manifest: without a WAL, this is what makes the store durable.
	if err := db.Flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("embedded: restore: %w", err)
	}
	return info, nil
}

// checkRestoredKey refuses a record no store at revision rev holds.
// format receives the store format marker.
func checkRestoredKey(key, value []byte, rev int64, format *string) error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(what, args...))
	}
	switch {
	case string(key) == string(formatKey):
		if v := string(value); v != formatVersion && v != formatVersionV1 {
			return bad("store format %q (this build reads %q and %q)", v, formatVersionV1, formatVersion)
		}
		*format = string(value)
	case string(key) == string(revisionKey):
		r, err := decodeRevision(value)
		if err != nil || r != rev {
			return bad("store revision %d, its header says %d", r, rev)
		}
	case strings.HasPrefix(string(key), string(expiryPrefix)):
	case strings.HasPrefix(string(key), dataStart):
		kv, err := decodeKV(string(key), value)
		if err != nil {
			return bad("%v", err)
		}
		if kv.ModRevision > rev {
			return bad("%q at revision %d, above the snapshot's %d", key, kv.ModRevision, rev)
		}
	default:
		return bad("unknown key %q", key)
	}
	return nil
}
