package lock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errLost is what fencedLock answers a write it refuses after the lease
// was lost.
var errLost = errors.New("the lease was lost")

// fencedLock is the resourcelock.Interface of one campaign: client-go's
// LeaseLock, watched and corrected on the way (see the package doc).
// Every method of resourcelock.Interface is called from the elector's one
// goroutine; the accessors are called from the supervisor's.
type fencedLock struct {
	inner *resourcelock.LeaseLock
	log   *slog.Logger
	// lost is closed, once, when the lease is lost while this process
	// leads; fatal receives the first error that waiting for the lease
	// cannot get past (buffer 1; later ones are dropped); changed receives
	// a value when the holder seen changes (buffer 1: a pending value
	// means "look again", so a full buffer drops the new one). changed may
	// be nil.
	lost    chan struct{}
	fatal   chan error
	changed chan struct{}

	mu sync.Mutex // guards the fields below; never held during a request
	// high is the largest leaseTransitions read or written.
	high int
	// holder is the holder identity of the last record read or written
	// ("" for none, or no lease).
	holder string
	// leading: the last write that succeeded named this identity, and no
	// read since has shown otherwise.
	leading bool
	// acquired and token: the first acquisition's leaseTransitions.
	acquired bool
	token    int
	// record is the last successful write naming this identity as
	// client-go's candidates compare records: JSON, with times to the
	// second. since is when the first successful write of that same
	// record was sent, and leaseSeconds its leaseDurationSeconds.
	record       []byte
	since        time.Time
	leaseSeconds int
	// mayRelease is false while the command may run: client-go's release
	// is then refused.
	mayRelease bool
	lostReason string
	// lastErr is the last request's error, nil after a success: why a
	// campaign whose renewals failed lost the lease.
	lastErr error
}

func newFencedLock(inner *resourcelock.LeaseLock, log *slog.Logger, high int, changed chan struct{}) *fencedLock {
	return &fencedLock{
		inner:      inner,
		log:        log,
		lost:       make(chan struct{}),
		fatal:      make(chan error, 1),
		changed:    changed,
		high:       high,
		mayRelease: true,
	}
}

var _ resourcelock.Interface = (*fencedLock)(nil)

func (l *fencedLock) Identity() string     { return l.inner.Identity() }
func (l *fencedLock) Describe() string     { return l.inner.Describe() }
func (l *fencedLock) RecordEvent(s string) { l.inner.RecordEvent(s) }

// Get reads the lease. A record naming another holder, or no lease, while
// this process leads means the lease was lost.
func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.inner.Get(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		if l.leading {
			l.loseLocked("the lease was deleted")
		}
		l.setHolderLocked("")
	case err != nil:
		if Refused(err) && !l.leading {
			l.fatalLocked(err)
		}
		l.failedLocked("get", err)
	default:
		l.high = max(l.high, rec.LeaderTransitions)
		if l.leading && rec.HolderIdentity != l.Identity() {
			if rec.HolderIdentity == "" {
				l.loseLocked("another client cleared the holder")
			} else {
				l.loseLocked(fmt.Sprintf("taken by %q", rec.HolderIdentity))
			}
		}
		l.setHolderLocked(rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create creates the lease, acquiring it.
func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent, err := l.prepare(&ler)
	if err != nil {
		return err
	}
	err = l.inner.Create(ctx, ler)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// The namespace does not exist, or the server refuses the
		// lease: retrying does not help.
		if apierrors.IsNotFound(err) || Refused(err) || apierrors.IsInvalid(err) {
			l.fatalLocked(err)
		}
		l.failedLocked("create", err)
		return err
	}
	l.wroteLocked(ler, sent)
	return nil
}

// Update writes the lease: an acquisition, a renewal or a release.
func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent, err := l.prepare(&ler)
	if err != nil {
		return err
	}
	err = l.inner.Update(ctx, ler)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// Refused while waiting: it will be refused again. (A refused
		// renewal loses the lease at the renew deadline.)
		if Refused(err) && !l.leading {
			l.fatalLocked(err)
		}
		l.failedLocked("update", err)
		return err
	}
	l.wroteLocked(ler, sent)
	return nil
}

// prepare corrects a record about to be written, or refuses to write it,
// and returns the time the write is sent.
func (l *fencedLock) prepare(ler *resourcelock.LeaderElectionRecord) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ler.HolderIdentity == "" {
		// client-go's release, the only write of an empty holder. It
		// runs when the elector stops: after the supervisor allowed it,
		// or because renewing failed past the renew deadline.
		if !l.mayRelease {
			l.loseLocked("renewing failed past the renew deadline")
			return time.Time{}, errors.New("not releasing the lease while the command may still run")
		}
		// client-go's release reads the lease, then clears it if its own
		// last observation (not that read) names it: never clear another
		// holder's record.
		if l.holder != l.Identity() {
			return time.Time{}, fmt.Errorf("not releasing the lease: it is held by %q", l.holder)
		}
		ler.LeaderTransitions = max(ler.LeaderTransitions, l.high)
		return time.Now(), nil
	}
	if l.leading {
		// A renewal: never lower the count.
		ler.LeaderTransitions = max(ler.LeaderTransitions, l.high)
		return time.Now(), nil
	}
	// An acquisition. client-go adds one to leaseTransitions only if the
	// record names someone else; it keeps the count when the record names
	// this identity (a write that was applied although its answer was
	// lost), and starts from 0 when it creates the lease. Count past
	// everything this process has seen, in every case.
	if l.isLostLocked() {
		return time.Time{}, errLost
	}
	ler.LeaderTransitions = max(ler.LeaderTransitions, l.high+1)
	return time.Now(), nil
}

// wroteLocked records a successful write sent at sent.
func (l *fencedLock) wroteLocked(ler resourcelock.LeaderElectionRecord, sent time.Time) {
	l.lastErr = nil
	l.high = max(l.high, ler.LeaderTransitions)
	l.setHolderLocked(ler.HolderIdentity)
	if ler.HolderIdentity != l.Identity() {
		l.leading = false
		return
	}
	if !l.leading && !l.acquired {
		l.acquired, l.token = true, ler.LeaderTransitions
		l.log.Info("acquired the lease", "token", l.token, "identity", l.Identity())
	}
	l.leading = true
	// Candidates restart the lease's clock only when the record they
	// read differs from the last one they saw: renewals within the same
	// second of renewTime do not count for them.
	rec, err := json.Marshal(ler)
	if err != nil || !bytes.Equal(rec, l.record) {
		l.record, l.since = rec, sent
	}
	l.leaseSeconds = ler.LeaseDurationSeconds
}

// fatalLocked reports err on fatal, unless an error is pending there.
func (l *fencedLock) fatalLocked(err error) {
	select {
	case l.fatal <- err:
	default:
	}
}

func (l *fencedLock) failedLocked(op string, err error) {
	l.lastErr = fmt.Errorf("%s: %w", op, err)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, context.Canceled) {
		// Another candidate wrote first: the normal race.
		l.log.Debug("lease request failed", "op", op, "err", err)
		return
	}
	if Refused(err) && !l.leading {
		// Reported on fatal, and so by the caller.
		l.log.Debug("lease request refused", "op", op, "err", err)
		return
	}
	l.log.Warn("lease request failed", "op", op, "err", err)
}

func (l *fencedLock) setHolderLocked(h string) {
	if h == l.holder {
		return
	}
	l.holder = h
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *fencedLock) loseLocked(reason string) {
	l.leading = false
	if l.isLostLocked() {
		return
	}
	l.lostReason = reason
	close(l.lost)
}

func (l *fencedLock) isLostLocked() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

// state is a consistent snapshot of what fencedLock knows.
type state struct {
	holder   string
	leading  bool
	acquired bool
	token    int
	high     int
	// expires is the earliest time another client-go candidate may see
	// the lease expired: its lease duration after the send time of the
	// first write of the record as it stands (a candidate starts the
	// lease's clock when it reads a record that differs from the one it
	// saw before, which is after the write, which is after the send).
	// Zero before the first acquisition.
	expires    time.Time
	lostReason string
	lastErr    error
}

func (l *fencedLock) state() state {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := state{
		holder:     l.holder,
		leading:    l.leading,
		acquired:   l.acquired,
		token:      l.token,
		high:       l.high,
		lostReason: l.lostReason,
		lastErr:    l.lastErr,
	}
	if l.acquired {
		s.expires = l.since.Add(time.Duration(l.leaseSeconds) * time.Second)
	}
	return s
}

// beginCommand forbids releasing the lease, and reports whether this
// process leads and has not lost the lease, so that the command may start.
func (l *fencedLock) beginCommand() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading || l.isLostLocked() {
		return false
	}
	l.mayRelease = false
	return true
}

// endCommand allows releasing the lease again: the command and its
// process group are gone.
func (l *fencedLock) endCommand() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mayRelease = true
}
