package embedded

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Expiry. A value written with a TTL is stored with its expiry (see
// record.go), and its key is entered in the expiry index, whose keys sort
// by expiry: the committer moves the entry in the same batch as every put
// and delete of the key, so the index always holds exactly the current
// expiries. The reaper goroutine reads, once a round (every
// expiryInterval), the index from its watermark up to the present, and
// sends the committer an opExpire for each entry found; the committer
// deletes the key if it still has that expiry, as one more write with a
// revision and a watch event, in the group commits of the other writes.
// A round costs what expires in it: the index before the watermark,
// tombstones included, is never read again, and keys expiring later are
// not looked at.
//
// The watermark is the present of the last round. A key written to
// expire before it (the clock went back) is found anyway: the committer
// reports the earliest expiry it commits (expiry.written), and the next
// round starts there.

const (
	// expiryInterval is the time between two rounds of the reaper: keys
	// are deleted at most this late (plus the time of their commit).
	expiryInterval = time.Second
	// expiryBatch bounds the keys one round reads from the index at once;
	// a round reads again until nothing is due.
	expiryBatch = 1024
	// compactAfterExpiries is how many expired keys make the reaper
	// compact the store once they stop expiring: what a burst of
	// expiring writes (an event storm) leaves behind is tombstones over
	// the deleted data, which pebble would otherwise keep on disk until
	// later writes happen to compact them away.
	compactAfterExpiries = 10000
)

// errExpiryGone answers an opExpire for a key rewritten or deleted since
// the reaper read its index entry: there is nothing to expire.
var errExpiryGone = errors.New("embedded: the key no longer has that expiry")

// expiry is what the committer tells the reaper.
type expiry struct {
	// floor is the earliest expiry committed since the reaper last took
	// it (math.MaxInt64: none).
	floor atomic.Int64
}

func (e *expiry) init() { e.floor.Store(math.MaxInt64) }

// written notes an expiry that has been committed.
func (e *expiry) written(expires int64) {
	for {
		f := e.floor.Load()
		if expires >= f || e.floor.CompareAndSwap(f, expires) {
			return
		}
	}
}

// take returns the earliest expiry committed since the last take.
func (e *expiry) take() int64 { return e.floor.Swap(math.MaxInt64) }

// due is an index entry whose time has come.
type due struct {
	expires int64
	key     string
}

// runReaper deletes expired keys until the store stops.
func (s *Store) runReaper() {
	defer s.background.Done()
	var watermark int64 // every entry before it has been handled
	expired := 0        // keys expired since the last compaction
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		var n int
		watermark, n = s.reapRound(min(watermark, s.expiry.take()))
		expired += n
		if n == 0 && expired >= compactAfterExpiries {
			s.compactExpired()
			expired = 0
		}
		timer.Reset(expiryInterval)
	}
}

// compactExpired compacts the whole store, dropping the tombstones of the
// keys expired in a burst, unless the store is out of space (a compaction
// needs room for its output) or failing.
func (s *Store) compactExpired() {
	if s.Err() != nil || isNoSpace(s.NoSpace(s.ctx)) {
		return
	}
	if err := s.rlock(s.ctx); err != nil {
		return
	}
	defer s.mu.RUnlock()
	start := time.Now()
	// Every key: bookkeeping keys begin with 0x00, storage keys with '/'.
	if err := s.db.Compact(s.ctx, []byte{0}, []byte{'/' + 1}, false); err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("compacting after keys expired", "err", err)
		}
		return
	}
	s.log.Debug("compacted after keys expired", "took", time.Since(start))
}

// reapRound expires every key due from watermark to now and returns the
// next watermark and how many index entries it handled.
func (s *Store) reapRound(watermark int64) (int64, int) {
	now := s.opts.Now().UnixMilli()
	if watermark > now {
		return watermark, 0 // the clock went back
	}
	failed := int64(math.MaxInt64)
	from := expiryKey(watermark, "")
	handled := 0
	for {
		batch, err := s.dueExpiries(from, now)
		if err != nil {
			if s.Err() == nil {
				s.log.Error("reading the expiry index", "err", err)
			}
			return min(watermark, failed), handled
		}
		failed = min(failed, s.expire(batch))
		handled += len(batch)
		if len(batch) < expiryBatch {
			return min(now+1, failed), handled
		}
		// More may be due: read on after the last entry.
		last := batch[len(batch)-1]
		from = append(expiryKey(last.expires, last.key), 0)
	}
}

// dueExpiries reads up to expiryBatch index entries from index key from
// (included) to those expiring at now (included), in index order.
func (s *Store) dueExpiries(from []byte, now int64) ([]due, error) {
	if err := s.rlock(s.ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: from,
		UpperBound: expiryKey(now+1, ""),
	})
	if err != nil {
		return nil, err
	}
	var out []due
	for ok := it.First(); ok && len(out) < expiryBatch; ok = it.Next() {
		expires, key, err := parseExpiryKey(it.Key())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		out = append(out, due{expires: expires, key: key})
	}
	return out, errors.Join(it.Error(), it.Close())
}

// expire has the committer delete the keys of batch that still have their
// expiry, and waits for the answers. It returns the earliest expiry it
// could not apply for another reason (the store out of space, failing or
// closing), for the next round to try again; math.MaxInt64 when none.
func (s *Store) expire(batch []due) int64 {
	failed := int64(math.MaxInt64)
	reqs := make([]*writeReq, 0, len(batch))
	for _, d := range batch {
		r := s.reqs.Get().(*writeReq)
		r.ctx, r.op, r.key, r.expires = s.ctx, opExpire, d.key, d.expires
		if err := s.enqueue(s.ctx, r); err != nil {
			r.reset()
			s.reqs.Put(r)
			failed = min(failed, d.expires)
			continue
		}
		reqs = append(reqs, r)
	}
	// The committer answers every queued request, also while closing.
	for _, r := range reqs {
		<-r.done
		if err := r.err; err != nil && !errors.Is(err, errExpiryGone) {
			failed = min(failed, r.expires)
			if s.Err() == nil && !isNoSpace(err) {
				s.log.Warn("expiring a key", "key", r.key, "err", err)
			}
		}
		r.reset()
		s.reqs.Put(r)
	}
	return failed
}
