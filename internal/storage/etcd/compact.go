package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact discards etcd's history before rev: watches and reads at older
// revisions fail with storage.ErrCompacted afterwards. Compacting to a
// revision at or below the last compaction fails with storage.ErrCompacted.
// The engine compacts on its own every Options.CompactInterval; Compact is
// for tests and tools.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	op := fmt.Sprintf("compact to %d", rev)
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcd: %s: %w", op, err)
	}
	defer end()
	if _, err := s.client.Compact(ctx, rev); err != nil {
		return s.mapErr(ctx, op, err)
	}
	return nil
}

// compactRound is what the compactor knows between rounds.
type compactRound struct {
	// version is the version of compactRevKey this replica saw last: the
	// number of compaction rounds the cluster has run.
	version int64
	// rev is the cluster's revision when this replica last looked, one
	// interval ago: what the next round compacts to.
	rev int64
}

// runCompactor compacts every Options.CompactInterval until ctx ends, in
// turn with every other replica of the cluster (see the package
// documentation, "Compaction"). The first compaction happens two intervals
// after Open at the earliest: the first round only records the revision.
func (s *Store) runCompactor(ctx context.Context) {
	var round compactRound
	timer := time.NewTimer(s.opts.CompactInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		round = s.compactOnce(ctx, round)
		timer.Reset(s.opts.CompactInterval)
	}
}

// compactOnce runs one round: if no other replica has run one since this
// replica's last (compactRevKey still has the version it saw), it bumps the
// version, recording the revision it compacts to, and compacts; otherwise it
// learns the new version and leaves this round to the replica that ran it.
// kube-apiserver's algorithm (apiserver/pkg/storage/etcd3/compact.go).
func (s *Store) compactOnce(stop context.Context, last compactRound) compactRound {
	ctx, cancel := context.WithTimeout(stop, s.opts.RequestTimeout)
	defer cancel()
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(compactRevKey), "=", last.version)).
		Then(clientv3.OpPut(compactRevKey, strconv.FormatInt(last.rev, 10))).
		Else(clientv3.OpGet(compactRevKey)).
		Commit()
	if err != nil {
		if stop.Err() == nil { // not closing
			s.log.Warn("compaction round failed; trying again next interval", "err", wrapErr("compaction", err))
		}
		return last
	}
	next := compactRound{rev: resp.Header.Revision}
	if !resp.Succeeded {
		// Another replica ran this round; its version is the one to
		// compare with next time. (A missing key, deleted by hand, has
		// version 0.)
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			next.version = kvs[0].Version
		}
		return next
	}
	next.version = last.version + 1
	if last.rev == 0 {
		return next // no revision from one interval ago yet
	}
	if _, err := s.client.Compact(ctx, last.rev); err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			// Someone compacted further already (by hand, or a
			// replica with another interval).
			return next
		}
		s.log.Warn("compaction failed; trying again next interval", "rev", last.rev, "err", wrapErr("compaction", err))
		return next
	}
	s.log.Debug("compacted etcd history", "rev", last.rev, "round", next.version)
	return next
}
