package leasemetrics

import (
	"cmp"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The history's bounds (see the package doc).
const (
	// historyDepth is how many tenures a lease's history keeps.
	historyDepth = 10
	// maxHolderBytes is how much of a holder's identity a tenure keeps:
	// holderIdentity has no length limit of its own.
	maxHolderBytes = 128
	// defaultHistoryLeases is Options.MaxHistoryLeases's default.
	defaultHistoryLeases = 4096
)

// Tenure is one holder's time with a lease, as this replica saw it.
type Tenure struct {
	Holder string `json:"holder"`
	// Since is when the holder took the lease: its acquireTime (unless
	// older than the previous holder's last renewal), else its renewTime,
	// else when this replica saw the change.
	Since time.Time `json:"since"`
	// LastRenew is the holder's latest renewTime seen (Since without one).
	LastRenew time.Time `json:"lastRenew"`
	// Released: the holder cleared holderIdentity, rather than another
	// holder taking the lease.
	Released bool `json:"released,omitempty"`
	// GapSeconds is the time from the previous tenure's LastRenew to this
	// one's Since: no holder renewed in between. 0 for the oldest tenure
	// kept, or when the new holder took over before (preemption, skew).
	GapSeconds float64 `json:"gapSeconds"`
}

// LeaseHistory is a lease's last tenures, oldest first.
type LeaseHistory struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Holders   []Tenure `json:"holders"`
	// Dropped counts the older tenures that no longer fit.
	Dropped int `json:"dropped,omitempty"`
}

// HistoryList answers a request for the histories of a namespace's
// leases (or all).
type HistoryList struct {
	// Since is when this replica began to follow the leases: it knows
	// of no change before.
	Since  time.Time      `json:"since"`
	Leases []LeaseHistory `json:"leases"`
	// Untracked counts the held leases in scope without a history: the
	// cap on leases tracked was reached before they were seen.
	Untracked int `json:"untracked"`
	// Depth and MaxLeases are the bounds.
	Depth     int `json:"depth"`
	MaxLeases int `json:"maxLeases"`
}

// history is one lease's tenures, oldest first, at most historyDepth.
type history struct {
	tenures []Tenure
	dropped int
}

// recordLocked updates e's history for its new state l, before e takes
// it (e.holder is still the previous holder; isNew: e is new).
func (o *Observer) recordLocked(e *entry, l *coordinationv1.Lease, isNew bool) {
	s := &l.Spec
	holder := ""
	if s.HolderIdentity != nil {
		holder = *s.HolderIdentity
	}
	var renew, acquire time.Time
	if s.RenewTime != nil {
		renew = s.RenewTime.Time
	}
	if s.AcquireTime != nil {
		acquire = s.AcquireTime.Time
	}
	changed := isNew || holder != e.holder
	if e.hist == nil {
		// Only a holder change earns an untracked lease a place that
		// another holds: leases that never change (a node's) must not
		// keep out those that do.
		if holder == "" || !o.trackLocked(e, changed && !isNew) {
			return
		}
		changed = true
	}
	h := e.hist
	var cur *Tenure
	if n := len(h.tenures); n > 0 {
		cur = &h.tenures[n-1]
	}
	switch {
	case holder == "":
		// Released: the tenure ends (client-go's release sets renewTime).
		if cur != nil && !cur.Released {
			cur.Released = true
			if renew.After(cur.LastRenew) {
				cur.LastRenew = renew
			}
		}
	case !changed && cur != nil && !cur.Released:
		if renew.After(cur.LastRenew) {
			cur.LastRenew = renew
		}
	default:
		t := Tenure{Holder: clipHolder(holder), Since: renew}
		if !acquire.IsZero() && (cur == nil || !acquire.Before(cur.LastRenew)) {
			t.Since = acquire
		}
		if t.Since.IsZero() {
			t.Since = o.opts.Now()
		}
		if renew.After(t.Since) {
			t.LastRenew = renew
		} else {
			t.LastRenew = t.Since
		}
		if cur != nil {
			t.GapSeconds = max(0, t.Since.Sub(cur.LastRenew).Seconds())
		}
		if len(h.tenures) == historyDepth {
			copy(h.tenures, h.tenures[1:])
			h.tenures = h.tenures[:historyDepth-1]
			h.dropped++
		}
		if len(h.tenures) == cap(h.tenures) {
			// Grow to historyDepth at most: append could double to 16.
			grown := make([]Tenure, len(h.tenures), min(2*cap(h.tenures), historyDepth))
			copy(grown, h.tenures)
			h.tenures = grown
		}
		h.tenures = append(h.tenures, t)
	}
}

// trackLocked gives e a history if the cap allows, or if evict and a
// tracked lease has never changed holder (it gives up its place).
func (o *Observer) trackLocked(e *entry, evict bool) bool {
	if len(o.tracked) >= o.opts.MaxHistoryLeases {
		if !evict {
			return false
		}
		var victim *entry
		for t := range o.tracked {
			if len(t.hist.tenures) <= 1 && t.hist.dropped == 0 {
				victim = t
				break
			}
		}
		if victim == nil {
			return false
		}
		o.untrackLocked(victim)
	}
	e.hist = &history{tenures: make([]Tenure, 0, 2)}
	o.tracked[e] = struct{}{}
	return true
}

func (o *Observer) untrackLocked(e *entry) {
	if e.hist != nil {
		delete(o.tracked, e)
		e.hist = nil
	}
}

// clipHolder bounds a holder's identity to maxHolderBytes, whole runes,
// in a string of its own (a slice would keep the whole one alive).
func clipHolder(h string) string {
	if len(h) <= maxHolderBytes {
		return h
	}
	return strings.Clone(strings.ToValidUTF8(h[:maxHolderBytes], ""))
}

// History returns the histories of namespace's leases ("" for all), in
// namespace and name order: copies, the caller's to keep.
func (o *Observer) History(namespace string) HistoryList {
	o.mu.Lock()
	defer o.mu.Unlock()
	list := HistoryList{Since: o.started, Depth: historyDepth, MaxLeases: o.opts.MaxHistoryLeases, Leases: []LeaseHistory{}}
	add := func(e *entry) {
		switch {
		case e.hist != nil:
			list.Leases = append(list.Leases, LeaseHistory{Namespace: e.Namespace, Name: e.Name,
				Holders: slices.Clone(e.hist.tenures), Dropped: e.hist.dropped})
		case e.held():
			list.Untracked++
		}
	}
	if namespace != "" {
		if ns := o.namespaces[namespace]; ns != nil {
			for _, e := range ns.all {
				add(e)
			}
		}
	} else {
		for _, e := range o.byKey {
			add(e)
		}
	}
	slices.SortFunc(list.Leases, func(a, b LeaseHistory) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return list
}
