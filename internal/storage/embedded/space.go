package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasehold/leasehold/internal/storage"
)

// Space. Pebble cannot survive a full disk: a WAL write that fails is fatal
// to its commit pipeline, and a flush that cannot write its table stalls
// every write behind it. So the committer refuses writes, with a
// storage.NoSpaceError, before the disk is full:
//
//   - the reserve: while the data directory's filesystem has less than
//     Options.ReserveBytes free, puts are refused; deletes are still
//     accepted down to half the reserve. What is left of the reserve is
//     for pebble's own background work (flushing the memtables already
//     written, compactions) and for the deletes. Once refusing, puts
//     resume when a quarter of the reserve more is free (hysteresis,
//     since a flush frees WAL space as it goes).
//   - the quota: a put that would make the live data (keys and records of
//     the current version of every key) larger than Options.QuotaBytes is
//     refused. Puts that do not grow the data (most updates, lease
//     renewals among them) and deletes are always accepted by the quota.
//     The quota counts data, not files, so that deletes free it at once,
//     without waiting for a compaction; the files take about as much
//     again, plus the memtables' WALs (see Options.QuotaBytes).
//
// The filesystem is asked (statfs) once per batch, which costs about a
// microsecond next to the batch's fsync. A refused write consumes no
// revision and changes nothing, like a failed precondition.

// Defaults for Options.QuotaBytes and Options.ReserveBytes.
const (
	// DefaultQuotaBytes is etcd's default --quota-backend-bytes.
	DefaultQuotaBytes = 2 << 30
	// DefaultReserveBytes covers what pebble writes once puts stop: the
	// flush of up to three memtables (MemTableSize each), the WAL and
	// MANIFEST files that go with them, and the deletes meanwhile.
	// Compactions bound their own size by the free space.
	DefaultReserveBytes = 64 << 20
)

// spaceLogInterval is the least time between two "storage full" warnings:
// a store at its limit may refuse and accept writes in turns.
const spaceLogInterval = time.Minute

// space keeps the store within its reserve and quota. The committer calls
// begin, checkPut and checkDelete for each batch and committed after it;
// NoSpace may be called by anyone.
type space struct {
	fs      vfs.FS
	dir     string
	reserve int64
	quota   int64 // 0: none
	log     *slog.Logger

	// used is the size of the live data: for every key, len(key) plus the
	// length of its record. The committer changes it after each commit.
	used atomic.Int64

	// mu guards the fields below. The committer takes it once per batch,
	// never while it waits.
	mu sync.Mutex
	// full is the condition while writes are refused, nil otherwise.
	full *storage.NoSpaceError
	// fullDisk says that full is the reserve's, else the quota's; then
	// fullNeed is the growth of the put refused, which ends the condition
	// once it would fit.
	fullDisk bool
	fullNeed int64
	// warned is when the last "storage full" warning was logged.
	warned time.Time
	// statErr is the last failure to ask the filesystem, logged once.
	statErr error
}

func newSpace(fs vfs.FS, dir string, reserve, quota int64, log *slog.Logger) *space {
	return &space{fs: fs, dir: dir, reserve: reserve, quota: quota, log: log}
}

// resume is the free space above the reserve that ends a refusal by the
// reserve: a flush frees WAL space as it goes, and without this margin
// puts would be refused and accepted in turns.
func (sp *space) resume() int64 { return sp.reserve + sp.reserve/4 }

// batchSpace is the committer's view of space during one batch.
type batchSpace struct {
	// free is the filesystem's free space at the batch's start, less what
	// the batch writes so far; -1 when unknown (no statfs), which refuses
	// nothing.
	free int64
	// used is the live data size with the batch's writes so far.
	used int64
	// fullDisk: the reserve was reached before the batch.
	fullDisk bool
	// refused is the first refusal of the batch, nil if none; refusedDisk
	// and refusedNeed as space.fullDisk and fullNeed.
	refused     *storage.NoSpaceError
	refusedDisk bool
	refusedNeed int64
	// put says that the batch accepted a put.
	put bool
}

// begin starts a batch: it asks the filesystem for its free space.
func (sp *space) begin() batchSpace {
	sp.mu.Lock()
	fullDisk := sp.full != nil && sp.fullDisk
	sp.mu.Unlock()
	return batchSpace{free: sp.free(), used: sp.used.Load(), fullDisk: fullDisk}
}

// free returns the free bytes of the data directory's filesystem, or -1
// when the filesystem cannot tell.
func (sp *space) free() int64 {
	du, err := sp.fs.GetDiskUsage(sp.dir)
	if err != nil {
		sp.mu.Lock()
		if sp.statErr == nil {
			sp.log.Warn("cannot ask the filesystem for its free space; the storage reserve is not enforced", "err", err)
		}
		sp.statErr = err
		sp.mu.Unlock()
		return -1
	}
	return int64(min(du.AvailBytes, 1<<62))
}

// walBytes estimates what writing key and record adds to the WAL.
func walBytes(key string, record int) int64 { return int64(len(key)+record) + 16 }

// dataSize is what a key and its record count in the live data.
func dataSize(key string, record int) int64 { return int64(len(key) + record) }

func uvarintLen(v int64) int {
	n := 1
	for u := uint64(v); u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

// checkPut admits or refuses a put of record bytes under key, replacing
// old bytes of live data (0 for a new key), and accounts for it in b.
func (sp *space) checkPut(b *batchSpace, key string, record int, old int64) error {
	grow := dataSize(key, record) - old
	if b.free >= 0 {
		need := sp.reserve + walBytes(key, record)
		if b.fullDisk {
			need = sp.resume() + walBytes(key, record)
		}
		if b.free < need {
			return b.refuse(sp.diskFull(b.free), true, 0)
		}
		b.free -= walBytes(key, record)
	}
	if sp.quota > 0 && grow > 0 && b.used+grow > sp.quota {
		return b.refuse(sp.quotaFull(b.used), false, grow)
	}
	b.used += grow
	b.put = true
	return nil
}

// checkDelete admits or refuses a delete of old bytes of live data under
// key, and accounts for it in b. Deletes are refused only below half the
// reserve.
func (sp *space) checkDelete(b *batchSpace, key string, old int64) error {
	if b.free >= 0 {
		if b.free < sp.reserve/2+walBytes(key, 0) {
			return b.refuse(sp.diskFull(b.free), true, 0)
		}
		b.free -= walBytes(key, 0)
	}
	b.used -= old
	return nil
}

func (b *batchSpace) refuse(err *storage.NoSpaceError, disk bool, need int64) error {
	if b.refused == nil {
		b.refused, b.refusedDisk, b.refusedNeed = err, disk, need
	}
	return err
}

// committed records a batch's outcome once it is durable (or once it
// wrote nothing): the new data size, and whether writes are being refused.
func (sp *space) committed(b *batchSpace) {
	sp.used.Store(b.used)
	if b.refused != nil {
		sp.setFull(b.refused, b.refusedDisk, b.refusedNeed)
		return
	}
	sp.mu.Lock()
	full, disk, need := sp.full, sp.fullDisk, sp.fullNeed
	sp.mu.Unlock()
	// A put accepted despite a full disk found room above the resume
	// mark; a refusal by the quota ends once the refused put would fit.
	if full != nil && (disk && b.put || !disk && b.used+need <= sp.quota) {
		sp.clearFull(full)
	}
}

// The messages name leasehold's flags: they are meant for the operator,
// who reads them in the client's error and in the log.

func (sp *space) diskFull(free int64) *storage.NoSpaceError {
	return &storage.NoSpaceError{Message: fmt.Sprintf(
		"database space exceeded: the filesystem of leasehold's data directory has %s free, less than the %s that leasehold keeps in reserve (--storage-reserve-bytes), so it accepts only deletes; "+
			"free space on that filesystem (or grow it), or delete objects, and writes resume by themselves",
		bytesString(max(free, 0)), bytesString(sp.reserve))}
}

func (sp *space) quotaFull(used int64) *storage.NoSpaceError {
	return &storage.NoSpaceError{Message: fmt.Sprintf(
		"database space exceeded: leasehold's store holds %s of objects and its quota is %s (--storage-quota-bytes), so it accepts only deletes and updates that do not grow it; "+
			"delete objects, and writes resume by themselves, or restart leasehold with a larger --storage-quota-bytes",
		bytesString(used), bytesString(sp.quota))}
}

// setFull records that writes are being refused, with one warning when
// they start to be (at most one per spaceLogInterval).
func (sp *space) setFull(err *storage.NoSpaceError, disk bool, need int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	was := sp.full
	sp.full, sp.fullDisk, sp.fullNeed = err, disk, need
	if was != nil {
		return
	}
	if time.Since(sp.warned) >= spaceLogInterval {
		sp.warned = time.Now()
		sp.log.Warn("storage full: refusing writes that need space until there is room again", "reason", err.Message)
	} else {
		sp.log.Debug("storage full again", "reason", err.Message)
	}
}

// clearFull ends the condition, when it is still cond, with one line
// saying so.
func (sp *space) clearFull(cond *storage.NoSpaceError) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.full == nil || sp.full != cond {
		return
	}
	sp.full = nil
	sp.log.Info("storage has room again: accepting writes", "data", bytesString(sp.used.Load()), "quota", bytesString(sp.quota), "reserve", bytesString(sp.reserve))
}

// NoSpace reports whether the store is refusing writes for lack of space;
// see storage.SpaceReporter. While it is, NoSpace looks again at the
// filesystem or the data size, so that the condition ends as soon as
// there is room, even with no write to notice it.
func (sp *space) NoSpace() error {
	sp.mu.Lock()
	full, disk, need := sp.full, sp.fullDisk, sp.fullNeed
	sp.mu.Unlock()
	if full == nil {
		return nil
	}
	if disk {
		if free := sp.free(); free >= 0 && free < sp.resume() {
			return sp.diskFull(free)
		}
	} else if used := sp.used.Load(); used+need > sp.quota {
		return sp.quotaFull(used)
	}
	sp.clearFull(full)
	return nil
}

// NoSpace returns a *storage.NoSpaceError while the store refuses writes
// for lack of space, nil otherwise; see storage.SpaceReporter. It reads
// nothing from pebble: it asks the filesystem for its free space at most.
func (s *Store) NoSpace(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.space.NoSpace()
}

// measureData returns the size of the live data, as space.used counts it,
// by reading every data key once (Open does, before serving).
func measureData(db *pebble.DB) (int64, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte(dataStart)})
	if err != nil {
		return 0, err
	}
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return 0, err
		}
		n += dataSize(string(it.Key()), len(v))
	}
	return n, errors.Join(it.Error(), it.Close())
}

// isNoSpace reports whether err is the filesystem saying it is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// bytesString formats a size for people: 1.5 GiB, 64 MiB, 12 KiB, 10 B.
func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	// Rounded down: a free space is never overstated.
	v := float64(n) / float64(div)
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[exp]
	if v >= 10 || v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), suffix)
	}
	return fmt.Sprintf("%.1f %s", math.Floor(v*10)/10, suffix)
}

// Size is the space the store's files take on disk (pebble's tables, WAL
// and manifests), and DataBytes the live data the quota counts: the keys
// and records of the current version of every key.
type Size struct {
	DiskBytes int64
	DataBytes int64
}

// Size reports the store's size, for metrics; it does not touch the disk.
func (s *Store) Size() (Size, error) {
	if err := s.rlock(context.Background()); err != nil {
		return Size{}, err
	}
	defer s.mu.RUnlock()
	m := s.db.Metrics()
	return Size{DiskBytes: int64(m.DiskSpaceUsage()), DataBytes: s.space.used.Load()}, nil
}
