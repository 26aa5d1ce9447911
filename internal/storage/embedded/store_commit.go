package embedded

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/leasehold/leasehold/internal/storage"
)

// committer is the single writer. It owns the store revision and applies
// queued requests in group commits: it takes every request waiting in the
// queue (up to maxBatchWrites or maxBatchBytes), checks each precondition
// against the current state (requests of one batch see each other's
// effects), gives each successful write the next revision, commits all of
// them in ONE pebble batch with a single fsync, publishes the events, and
// only then answers the writers. Concurrent writers therefore share fsyncs,
// and no writer hears "done" before its write is on disk. After a busy
// commit it paces the next (see pace).
//
// There is no full in-memory index of keys: checking a precondition
// needs the key's current record, which the committer reads from pebble
// (or from earlier requests of the same batch), and a delete needs the
// last value anyway, to return it. Only the revisions of keys written
// lately are kept (known), so that a put of a key written again and
// again (a lease renewed every few seconds) reads no pebble: that read
// was 3% of a renewal's cost.
type committer struct {
	s   *Store
	rev int64 // newest committed revision; only the committer changes it

	// space is the batch's view of the store's space.
	space batchSpace

	// Reused from batch to batch.
	reqs    []*writeReq
	events  []storage.Event
	overlay map[string]current // keys written earlier in the batch
	// known: the state of keys written by earlier batches, without their
	// values; exact, as every write of a data key is the committer's.
	// Bounded by maxKnown: past it an arbitrary key is forgotten.
	known  map[string]keyState
	record []byte
	// expires is the earliest expiry the batch writes (math.MaxInt64:
	// none), told to the reaper once the batch is committed.
	expires int64
	// paceTimer times pace's waits; nil until the first.
	paceTimer *time.Timer
}

// current is a key's state as the committer sees it.
type current struct {
	kv     storage.KeyValue
	exists bool
	// expires is the value's expiry (Unix milliseconds; 0: never).
	expires int64
	// partial: kv.Value was not read (the state came from known).
	partial  bool
	valueLen int
}

// size is what the key counts in the live data (0 when it does not exist).
func (cur current) size(key string) int64 {
	if !cur.exists {
		return 0
	}
	return dataSize(key, recordLen(cur.kv.CreateRevision, cur.kv.ModRevision, cur.expires, cur.valueLen))
}

// keyState is what known keeps of an existing key.
type keyState struct {
	createRev, modRev, expires int64
	valueLen                   int
}

// maxKnown bounds known: ~100 bytes a key, 13 MB at most. A write to a
// key not known reads it from pebble, in a busy store often from disk
// (with 50,000 node leases and 32,768 known keys, a third of renewals
// did, 10% of the server's CPU); 131,072 keeps a large fleet's leases.
var maxKnown = 1 << 17 // a variable for tests

func (s *Store) runCommitter(rev int64) {
	defer close(s.committerDone)
	c := &committer{s: s, rev: rev, overlay: make(map[string]current), known: make(map[string]keyState), expires: math.MaxInt64}
	for {
		select {
		case r := <-s.queue:
			full := c.collect(r)
			start, writes := time.Now(), len(c.reqs)
			c.commit()
			c.pace(start, writes, full)
		case <-s.stop:
			// Close closes stop only once no writer can enqueue, so an
			// empty queue stays empty; otherwise keep committing.
			if len(s.queue) == 0 {
				return
			}
		}
	}
}

// collect starts a batch with first and adds whatever else is queued,
// without waiting for more. It reports whether the batch is full.
func (c *committer) collect(first *writeReq) (full bool) {
	c.reqs = append(c.reqs[:0], first)
	size := len(first.value)
	for len(c.reqs) < maxBatchWrites && size < maxBatchBytes {
		select {
		case r := <-c.s.queue:
			c.reqs = append(c.reqs, r)
			size += len(r.value)
		default:
			return false
		}
	}
	return true
}

// pace holds the committer after a busy commit, one of writes that began
// at start, until as many writes are queued again, or until
// Options.CommitInterval after start, whichever comes first. After a full
// batch there is a backlog: no wait. Close ends a wait.
func (c *committer) pace(start time.Time, writes int, full bool) {
	s := c.s
	wait := s.opts.CommitInterval - time.Since(start)
	if writes < busyBatch || full || wait <= 0 || len(s.queue) >= writes {
		return
	}
	s.paceWant.Store(int64(writes))
	// A writer that queued before paceWant was set did not look at it.
	if len(s.queue) < writes {
		if c.paceTimer == nil {
			c.paceTimer = time.NewTimer(wait)
		} else {
			c.paceTimer.Reset(wait)
		}
		select {
		case <-c.paceTimer.C:
		case <-s.paceWake:
		case <-s.stop:
		}
		c.paceTimer.Stop()
	}
	s.paceWant.Store(0)
	select { // a wake sent meanwhile is stale
	case <-s.paceWake:
	default:
	}
}

// commit applies c.reqs and answers every one of them.
func (c *committer) commit() {
	s := c.s
	defer func() {
		for i, r := range c.reqs {
			r.done <- struct{}{}
			c.reqs[i] = nil
		}
		clear(c.events) // drop references to values
		c.events = c.events[:0]
		clear(c.overlay)
	}()
	if err := s.Err(); err != nil {
		c.failAll(err)
		return
	}

	b := s.db.NewBatch()
	defer b.Close()
	c.space = s.space.begin()
	rev := c.rev
	for _, r := range c.reqs {
		next, err := c.apply(b, r, rev)
		if errors.Is(err, errBatch) {
			s.fail(err)
			c.failAll(s.Err())
			return
		}
		if err != nil {
			r.result, r.err = storage.KeyValue{}, err
		}
		rev = next
	}
	if rev == c.rev {
		// Only failed preconditions or refusals: nothing to write.
		s.space.committed(&c.space)
		return
	}

	if err := b.Set(revisionKey, encodeRevision(rev), nil); err != nil {
		s.fail(fmt.Errorf("building the batch for revisions %d-%d: %w", c.rev+1, rev, err))
		c.failAll(s.Err())
		return
	}
	s.applied.Store(rev)
	start := time.Now()
	err := s.commitBatch(b)
	if err == nil {
		// A failure recorded meanwhile (pebble's Fatalf) also voids it.
		err = s.Err()
	}
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(CommitStats{Writes: int(rev - c.rev), Sync: time.Since(start), Err: err})
	}
	if err != nil {
		s.fail(fmt.Errorf("commit of revisions %d-%d: %w", c.rev+1, rev, err))
		c.failAll(s.Err())
		return
	}
	c.rev = rev
	c.remember()
	if c.expires != math.MaxInt64 {
		s.expiry.written(c.expires)
		c.expires = math.MaxInt64
	}
	s.space.committed(&c.space)
	// committed must move before the history wakes its waiters: they
	// re-check it once woken.
	s.committed.Store(rev)
	s.hist.append(c.events, rev)
}

// errBatch marks a failure to build the batch itself, which fails the store.
var errBatch = errors.New("embedded: building the batch")

// apply checks r's precondition, adds its change to b, and returns the
// revision after it (rev+1 on success, rev unchanged on failure).
func (c *committer) apply(b *pebble.Batch, r *writeReq, rev int64) (int64, error) {
	if err := r.ctx.Err(); err != nil {
		return rev, err // the writer has gone; never applied
	}
	cur, err := c.current(r.key, r.op != opPut)
	if err != nil {
		c.s.log.Error("reading a key for a write", "key", r.key, "err", err)
		return rev, unavailable(fmt.Errorf("reading %q: %w", r.key, err))
	}
	switch r.op {
	case opPut:
		if r.expected == 0 && cur.exists || r.expected != 0 && (!cur.exists || cur.kv.ModRevision != r.expected) {
			if cur.partial {
				// The conflict carries the current value.
				if cur, err = c.current(r.key, true); err != nil {
					return rev, unavailable(fmt.Errorf("reading %q: %w", r.key, err))
				}
			}
			return rev, conflict(r, cur)
		}
		kv := storage.KeyValue{Key: r.key, Value: r.value, CreateRevision: rev + 1, ModRevision: rev + 1}
		if cur.exists {
			kv.CreateRevision = cur.kv.CreateRevision
		}
		c.record = appendRecord(c.record[:0], record{createRev: kv.CreateRevision, modRev: kv.ModRevision, expires: r.expires, value: kv.Value})
		if err := c.s.space.checkPut(&c.space, r.key, len(c.record), cur.size(r.key)); err != nil {
			return rev, err
		}
		rev++
		if err := b.Set([]byte(r.key), c.record, nil); err != nil {
			return rev - 1, fmt.Errorf("%w: %w", errBatch, err)
		}
		if err := c.reindex(b, r.key, cur.expires, r.expires); err != nil {
			return rev - 1, err
		}
		c.overlay[r.key] = current{kv: kv, exists: true, expires: r.expires, valueLen: len(kv.Value)}
		c.events = append(c.events, storage.Event{Type: storage.EventPut, KV: kv, Revision: rev})
		r.result = kv
	case opDelete, opExpire:
		switch {
		case r.op == opExpire && (!cur.exists || cur.expires != r.expires):
			// Rewritten or deleted since the reaper read the index.
			return rev, errExpiryGone
		case !cur.exists:
			return rev, errNotFound(r.key)
		case r.op == opDelete && cur.kv.ModRevision != r.expected:
			return rev, conflict(r, cur)
		}
		if err := c.s.space.checkDelete(&c.space, r.key, cur.size(r.key)); err != nil {
			return rev, err
		}
		rev++
		if err := b.Delete([]byte(r.key), nil); err != nil {
			return rev - 1, fmt.Errorf("%w: %w", errBatch, err)
		}
		if err := c.reindex(b, r.key, cur.expires, 0); err != nil {
			return rev - 1, err
		}
		kv := cur.kv
		kv.ModRevision = rev
		c.overlay[r.key] = current{}
		c.events = append(c.events, storage.Event{Type: storage.EventDelete, KV: storage.KeyValue{Key: r.key, ModRevision: rev}, Revision: rev})
		r.result = kv
	}
	return rev, nil
}

// reindex moves key's entry in the expiry index from the expiry it had
// (old) to the one it gets (now); 0 is none.
func (c *committer) reindex(b *pebble.Batch, key string, old, now int64) error {
	if old == now {
		return nil
	}
	if old > 0 {
		if err := b.Delete(expiryKey(old, key), nil); err != nil {
			return fmt.Errorf("%w: %w", errBatch, err)
		}
	}
	if now > 0 {
		if err := b.Set(expiryKey(now, key), nil, nil); err != nil {
			return fmt.Errorf("%w: %w", errBatch, err)
		}
		c.expires = min(c.expires, now)
	}
	return nil
}

// current returns key's state including the batch's earlier writes;
// without its value (partial) when value is false and known has it.
func (c *committer) current(key string, value bool) (current, error) {
	if cur, ok := c.overlay[key]; ok {
		return cur, nil
	}
	if k, ok := c.known[key]; ok && !value {
		kv := storage.KeyValue{Key: key, CreateRevision: k.createRev, ModRevision: k.modRev}
		return current{kv: kv, exists: true, expires: k.expires, partial: true, valueLen: k.valueLen}, nil
	}
	raw, closer, err := c.s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return current{}, nil
	}
	if err != nil {
		return current{}, err
	}
	defer closer.Close()
	rec, err := decodeRecord(raw)
	if err != nil {
		return current{}, fmt.Errorf("key %q: %w", key, err)
	}
	return current{kv: keyValue(key, rec), exists: true, expires: rec.expires, valueLen: len(rec.value)}, nil
}

// remember records the committed batch's writes in known.
func (c *committer) remember() {
	for key, cur := range c.overlay {
		if !cur.exists {
			delete(c.known, key)
			continue
		}
		if _, ok := c.known[key]; !ok && len(c.known) >= maxKnown {
			for k := range c.known { // an arbitrary one
				delete(c.known, k)
				break
			}
		}
		c.known[key] = keyState{createRev: cur.kv.CreateRevision, modRev: cur.kv.ModRevision, expires: cur.expires, valueLen: cur.valueLen}
	}
}

// failAll answers every request of the batch with err. The store is
// fail-stop at this point: even requests that failed their precondition
// are failed, since that check may have read the batch's own writes.
func (c *committer) failAll(err error) {
	for _, r := range c.reqs {
		r.result, r.err = storage.KeyValue{}, err
	}
}

func conflict(r *writeReq, cur current) error {
	ce := &storage.ConflictError{Key: r.key, Expected: r.expected}
	if cur.exists {
		kv := cur.kv
		ce.Current = &kv
	}
	return ce
}

// decodeKV builds a KeyValue from a data record, copying the value.
func decodeKV(key string, raw []byte) (storage.KeyValue, error) {
	rec, err := decodeRecord(raw)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("key %q: %w", key, err)
	}
	return keyValue(key, rec), nil
}

// keyValue builds a KeyValue from a decoded record, copying the value.
func keyValue(key string, rec record) storage.KeyValue {
	v := make([]byte, len(rec.value))
	copy(v, rec.value)
	return storage.KeyValue{Key: key, Value: v, CreateRevision: rec.createRev, ModRevision: rec.modRev}
}
