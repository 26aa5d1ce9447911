// Package leaseexpiry deletes the Leases that ask for it once they
// expire: a Lease annotated leasehold.dev/delete-after-expiry with a
// grace duration ("0s", "30s") is deleted when the server has not seen
// its spec.renewTime change for spec.leaseDurationSeconds plus the grace.
// It is how a registration ends with the process that made it, as an
// etcd key ends with its lease or a ZooKeeper node with its session.
// kube-apiserver has no such thing: a Lease without the annotation is
// never deleted.
//
// Expiry is judged by the server's clock alone: from when this
// controller last saw the renewTime change (or first saw the Lease, after
// a restart too), never from the renewTime's value, which is the holder's
// clock. A holder whose clock is an hour off is still judged right.
//
// The delete is conditional on the resourceVersion and UID last seen, so
// that a renewal racing it wins: the Lease then lives on. Each deletion
// is counted (leasehold_lease_expiry_deletions_total) and told in a
// Normal Event on the Lease; a value that is no duration gets a Warning
// Event, and the Lease is left alone.
//
// The controller keeps, per annotated Lease, its renewTime, when it was
// seen to change, its duration, resourceVersion and UID, and a min-heap
// of deadlines: a renewal is a map update and a push; nothing scans the
// Leases. It is a singleton on etcd.
package leaseexpiry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

const (
	// Name names the controller in logs and in its Lease.
	Name = "lease-expiry"
	// Annotation opts a Lease in; its value is the grace duration.
	Annotation = "leasehold.dev/delete-after-expiry"
	component  = "leasehold-lease-expiry"
	// retryAfterError is when a delete that failed is tried again.
	retryAfterError = 5 * time.Second
)

// Expirer is the controller, and the collector of its metric.
type Expirer struct {
	reg       *registry.Registry
	leases    resources.Resource
	log       *slog.Logger
	now       func() time.Time
	deletions prometheus.Counter

	mu sync.Mutex // guards the fields below
	// byKey holds the annotated Leases that expire.
	byKey map[types.NamespacedName]*entry
	// due holds deadlines, some stale (a later renewal pushed another).
	due controllers.Deadlines
	// invalid remembers the annotation values reported as invalid.
	invalid map[types.NamespacedName]string
	// gen is the current list's generation.
	gen  int
	wake chan struct{}
	// recorder is set while the controller runs.
	recorder record.EventRecorder
}

type entry struct {
	seen  controllers.Renewal
	after time.Duration
	rv    string
	uid   types.UID
	gen   int
}

func (e *entry) deadline() time.Time { return e.seen.At.Add(e.after) }

// New returns the expirer of reg's Leases.
func New(reg *registry.Registry, log *slog.Logger) (*Expirer, error) {
	leases, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		return nil, errors.New("leaseexpiry: leases are not served")
	}
	x := newExpirer(time.Now)
	x.reg, x.leases, x.log = reg, leases, log.With("controller", Name)
	return x, nil
}

func newExpirer(now func() time.Time) *Expirer {
	return &Expirer{
		now: now,
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_lease_expiry_deletions_total",
			Help: "Leases deleted by the server because they expired while annotated " + Annotation + ".",
		}),
		byKey:   map[types.NamespacedName]*entry{},
		invalid: map[types.NamespacedName]string{},
		wake:    make(chan struct{}, 1),
	}
}

// Describe and Collect make the expirer a prometheus.Collector.
func (x *Expirer) Describe(ch chan<- *prometheus.Desc) { x.deletions.Describe(ch) }
func (x *Expirer) Collect(ch chan<- prometheus.Metric) { x.deletions.Collect(ch) }

// Controller is the expirer as a singleton controller.
func (x *Expirer) Controller() controllers.Controller {
	return controllers.Controller{Name: Name, Singleton: true, Run: x.run}
}

func (x *Expirer) run(ctx context.Context) error {
	rec, stop := controllers.NewRecorder(x.reg, component)
	defer stop()
	x.mu.Lock()
	x.recorder = rec
	// A run that starts (again) judges every Lease from now.
	x.byKey, x.due = map[types.NamespacedName]*entry{}, controllers.Deadlines{}
	x.mu.Unlock()
	f := &controllers.Follower{Registry: x.reg, Resource: x.leases, Log: x.log, Listing: x.listing, Apply: x.apply}
	errc := make(chan error, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { errc <- f.Run(fctx) }()
	for {
		wait := x.expire(ctx)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case err := <-errc:
			timer.Stop()
			return err
		case <-x.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (x *Expirer) listing() {
	x.mu.Lock()
	x.gen++
	x.mu.Unlock()
}

// apply notes each change of a Lease: when its renewTime changes, the
// server's clock starts its time again.
func (x *Expirer) apply(events []registry.Event) {
	now := x.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				for k, e := range x.byKey {
					if e.gen != x.gen {
						delete(x.byKey, k)
					}
				}
			}
			continue
		}
		lease := ev.Object.Object().(*coordinationv1.Lease)
		k := controllers.KeyOf(lease)
		after, ok := x.expiresAfter(lease, ev.Type == watch.Deleted)
		if !ok {
			delete(x.byKey, k)
			continue
		}
		e := x.byKey[k]
		if e == nil || e.uid != lease.UID {
			e = &entry{uid: lease.UID}
			x.byKey[k] = e
		}
		e.seen = e.seen.Next(lease, now)
		e.after, e.rv, e.gen = after, lease.ResourceVersion, x.gen
		x.due.Push(e.deadline(), k)
	}
	// Stale deadlines go when the heap is twice what is live.
	x.due.Compact(len(x.byKey), func(push func(time.Time, types.NamespacedName)) {
		for k, e := range x.byKey {
			push(e.deadline(), k)
		}
	})
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// expiresAfter is how long lease lives unrenewed, and whether it is to
// be deleted then at all.
func (x *Expirer) expiresAfter(lease *coordinationv1.Lease, deleted bool) (time.Duration, bool) {
	v, ok := lease.Annotations[Annotation]
	if deleted || !ok || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds <= 0 {
		return 0, false
	}
	k := controllers.KeyOf(lease)
	grace, err := time.ParseDuration(v)
	if err != nil || grace < 0 {
		if x.invalid[k] != v && x.recorder != nil {
			x.invalid[k] = v
			x.recorder.Eventf(lease, corev1.EventTypeWarning, "InvalidDeleteAfterExpiry",
				"%s: %q is not a duration of 0s or more; the Lease will not be deleted when it expires", Annotation, v)
		}
		return 0, false
	}
	delete(x.invalid, k)
	return time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second + grace, true
}

// expire deletes the Leases whose deadline passed and returns how long
// until the next one.
func (x *Expirer) expire(ctx context.Context) time.Duration {
	now := x.now()
	type victim struct {
		key  types.NamespacedName
		e    entry
		late time.Duration
	}
	var victims []victim
	x.mu.Lock()
	for _, k := range x.due.PopDue(now) {
		e := x.byKey[k]
		if e == nil || e.deadline().After(now) {
			continue // renewed since, or gone
		}
		victims = append(victims, victim{key: k, e: *e, late: now.Sub(e.deadline())})
	}
	x.mu.Unlock()
	for _, v := range victims {
		x.delete(ctx, v.key, v.e, v.late)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	next := x.due.Next()
	if next.IsZero() {
		return time.Hour
	}
	return max(next.Sub(x.now()), 0)
}

// delete deletes the Lease k as last seen (e); a renewal since makes the
// delete fail, and the Lease lives.
func (x *Expirer) delete(ctx context.Context, k types.NamespacedName, e entry, late time.Duration) {
	rv, uid := e.rv, e.uid
	_, err := x.reg.Delete(ctx, x.leases, k.Namespace, k.Name, &metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case err == nil:
		x.deletions.Inc()
		x.log.Info("deleted an expired lease", "lease", k.String(), "unrenewed", e.after, "late", late)
		ref := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, UID: uid, ResourceVersion: rv}}
		x.recorder.Eventf(ref, corev1.EventTypeNormal, "DeletedAfterExpiry",
			"Not renewed for %s (leaseDurationSeconds and the grace of %s): deleted", e.after, Annotation)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err), ctx.Err() != nil:
		// Renewed or deleted meanwhile: its watch event is on its way.
	default:
		x.log.Warn("deleting an expired lease", "lease", k.String(), "err", err)
		x.mu.Lock()
		x.due.Push(x.now().Add(retryAfterError), k)
		x.mu.Unlock()
	}
}
