package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/leasehold/leasehold/internal/storage"
)

// noSpace follows etcd's NOSPACE alarm, to log when writes start and stop
// being refused (once each, not once per refused write).
type noSpace struct {
	mu   sync.Mutex // guards full
	full bool
}

// set records whether etcd refuses writes for lack of space, logging a
// change.
func (s *Store) setNoSpace(full bool) {
	s.space.mu.Lock()
	defer s.space.mu.Unlock()
	if s.space.full == full {
		return
	}
	s.space.full = full
	if full {
		s.log.Warn("etcd refuses writes: its database space is exceeded (NOSPACE alarm); it serves reads and deletes only, " +
			"until its history is compacted, its members are defragmented (etcdctl defrag) and the alarm is disarmed (etcdctl alarm disarm)")
	} else {
		s.log.Info("etcd accepts writes again: its NOSPACE alarm is disarmed")
	}
}

// NoSpace asks etcd for its alarms: while a NOSPACE alarm is raised, etcd
// refuses every write but deletes, and NoSpace returns a
// *storage.NoSpaceError with etcd's words. See storage.SpaceReporter.
func (s *Store) NoSpace(ctx context.Context) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcd: alarms: %w", err)
	}
	defer end()
	resp, err := s.client.AlarmList(ctx)
	if err != nil {
		return s.mapErr(ctx, "alarms", err)
	}
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			s.setNoSpace(true)
			return &storage.NoSpaceError{Message: fmt.Sprintf("%s (NOSPACE alarm raised by member %x)", rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace), a.MemberID)}
		}
	}
	s.setNoSpace(false)
	return nil
}

// noteErr follows the errors of requests: a refusal for lack of space
// means the alarm is raised. (Its end is noticed by NoSpace.)
func (s *Store) noteErr(err error) {
	if errors.Is(err, storage.ErrNoSpace) {
		s.setNoSpace(true)
	}
}
