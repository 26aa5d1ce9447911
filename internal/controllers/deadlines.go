package controllers

import (
	"container/heap"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Deadlines is a min-heap of when objects expire, for the controllers
// that act on expiry without scanning their objects: a renewal pushes a
// new deadline and leaves the old one, which the caller skips when it
// comes due (its object's deadline has moved on). Compact drops the
// stale ones once they outnumber the live.
type Deadlines struct{ h deadlineHeap }

// Push adds k's deadline at.
func (d *Deadlines) Push(at time.Time, k types.NamespacedName) { heap.Push(&d.h, deadline{at, k}) }

// PopDue removes and returns the keys whose deadlines are not after now,
// stale ones included.
func (d *Deadlines) PopDue(now time.Time) []types.NamespacedName {
	var out []types.NamespacedName
	for len(d.h) > 0 && !d.h[0].at.After(now) {
		out = append(out, heap.Pop(&d.h).(deadline).key)
	}
	return out
}

// Next is the earliest deadline; zero when there is none.
func (d *Deadlines) Next() time.Time {
	if len(d.h) == 0 {
		return time.Time{}
	}
	return d.h[0].at
}

// Compact rebuilds the heap from each live object's deadline, which
// each pushes, when it holds more than twice live entries (and 1,024).
func (d *Deadlines) Compact(live int, each func(push func(at time.Time, k types.NamespacedName))) {
	if len(d.h) <= 2*live+1024 {
		return
	}
	d.h = d.h[:0]
	each(func(at time.Time, k types.NamespacedName) { d.h = append(d.h, deadline{at, k}) })
	heap.Init(&d.h)
}

type deadline struct {
	at  time.Time
	key types.NamespacedName
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}
