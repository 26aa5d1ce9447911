package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// Name names the controller in logs and in the Lease that elects it
// (kube-system/leasehold-coordinated-leader-election).
const Name = "coordinated-leader-election"

const (
	// manager is the field manager of the controller's writes.
	manager = "leasehold"
	// retryAfterConflict is when a Lease is looked at again after a
	// write met a newer state (which is on its way to the mirrors), and
	// retryAfterError after any other failure (kube-apiserver's requeue
	// interval).
	retryAfterConflict = time.Second
	retryAfterError    = 5 * time.Second
	// gcInterval is how often expired candidates are looked for
	// (kube-apiserver: every 30 minutes, so they go 30 to 60 minutes
	// after their last renewal; here 30 to 31).
	gcInterval = time.Minute
)

// LeaseCandidates is the kind the controller needs served.
var LeaseCandidates = schema.GroupKind{Group: coordinationv1beta1.GroupName, Kind: "LeaseCandidate"}

// New returns the controller. It is a singleton: with several replicas
// on etcd, one of them runs it at a time.
func New(reg *registry.Registry, log *slog.Logger) controllers.Controller {
	return controllers.Controller{
		Name:      Name,
		Singleton: true,
		Run: func(ctx context.Context) error {
			c, err := newController(reg, log.With("controller", Name), time.Now)
			if err != nil {
				return err
			}
			return c.run(ctx)
		},
	}
}

// controller runs elections. Two mirrors follow Leases and
// LeaseCandidates; each change queues the Lease it concerns, and one
// worker goroutine takes the queued Leases when they are due, decides a
// step (decide) and writes it.
type controller struct {
	reg               *registry.Registry
	log               *slog.Logger
	now               func() time.Time
	leaseRes, candRes resources.Resource
	leases, cands     *controllers.Mirror // cands indexed by namespace/spec.leaseName
	queue             *controllers.Queue[types.NamespacedName]
	// lastErr is the last failure logged per Lease (no election, a write
	// refused), so that it is logged once, not at every step; the
	// worker's alone.
	lastErr map[types.NamespacedName]string
}

func newController(reg *registry.Registry, log *slog.Logger, now func() time.Time) (*controller, error) {
	leaseRes, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		return nil, errors.New("leases are not served")
	}
	candRes, ok := reg.ResourceFor(LeaseCandidates)
	if !ok {
		return nil, errors.New("leasecandidates are not served")
	}
	c := &controller{reg: reg, log: log, now: now, leaseRes: leaseRes, candRes: candRes, queue: controllers.NewQueue[types.NamespacedName](), lastErr: map[types.NamespacedName]string{}}
	c.leases = controllers.NewMirror(reg, leaseRes, log, nil, func(obj, _ resources.Object) {
		if k := controllers.KeyOf(obj); c.cands.HasIndex(k) {
			c.queue.Add(k, c.now())
		}
	})
	c.cands = controllers.NewMirror(reg, candRes, log, indexByLease, func(obj, _ resources.Object) {
		c.queue.Add(leaseOf(obj), c.now())
	})
	// Only the Leases with candidates are held; reconcile reads another
	// from the registry.
	c.leases.Keep = func(obj resources.Object) bool { return c.cands.HasIndex(controllers.KeyOf(obj)) }
	return c, nil
}

// indexByLease groups candidates by the Lease they stand for.
func indexByLease(obj resources.Object) (types.NamespacedName, bool) { return leaseOf(obj), true }

// leaseOf is the namespace/name of the Lease a candidate stands for.
func leaseOf(obj resources.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.(*coordinationv1beta1.LeaseCandidate).Spec.LeaseName}
}

func (c *controller) run(ctx context.Context) error {
	return controllers.RunMirrored(ctx, []*controllers.Mirror{c.leases, c.cands}, c.work)
}

// work takes the queued Leases as they fall due, and collects expired
// candidates every gcInterval, until ctx ends.
func (c *controller) work(ctx context.Context) error {
	gcAt := c.now()
	for {
		if now := c.now(); !now.Before(gcAt) {
			c.collect(ctx, now)
			gcAt = now.Add(gcInterval)
		}
		ready, next := c.queue.Due(c.now())
		for _, k := range ready {
			if at := c.reconcile(ctx, k); !at.IsZero() {
				c.queue.Add(k, at)
			}
		}
		if len(ready) > 0 {
			continue // what they queued may be due already
		}
		if err := c.queue.Wait(ctx, max(earliest(next, gcAt).Sub(c.now()), 0)); err != nil {
			return err
		}
	}
}

// reconcile runs one step of the election of the Lease k and returns
// when to look at it again (zero: when something changes).
func (c *controller) reconcile(ctx context.Context, k types.NamespacedName) time.Time {
	namespace, name := k.Namespace, k.Name
	now := c.now()
	lease, err := c.lease(ctx, k)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("reading lease", "lease", k.String(), "err", err)
		}
		return now.Add(retryAfterError)
	}
	var cands []*coordinationv1beta1.LeaseCandidate
	for _, o := range c.cands.ByIndex(k) {
		cands = append(cands, o.(*coordinationv1beta1.LeaseCandidate))
	}
	p := decide(now, namespace, name, lease, cands)
	failed := false
	// warn logs a failure of this Lease once, not at every step.
	warn := func(what string, err error) {
		failed = true
		if msg := what + ": " + err.Error(); c.lastErr[k] != msg {
			c.log.Warn(what, "lease", k.String(), "err", err)
			c.lastErr[k] = msg
		}
	}
	defer func() {
		if !failed {
			delete(c.lastErr, k)
		}
	}()
	if p.err != nil {
		warn("no election for lease", p.err)
	}
	next := p.next
	retry := func(what string, err error) {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
			next = earliest(next, now.Add(retryAfterConflict))
			return
		}
		next = earliest(next, now.Add(retryAfterError))
		warn(what, err)
	}
	for _, cand := range p.ping {
		upd := cand.DeepCopy()
		upd.Spec.PingTime = &metav1.MicroTime{Time: now}
		out, err := c.reg.Update(ctx, c.candRes, namespace, cand.Name, "", upd, registry.WriteOptions{Manager: manager})
		if err != nil {
			retry("pinging candidate "+cand.Name, err)
			continue
		}
		c.cands.Observe(out.Object)
		c.log.Debug("pinged candidate", "lease", k.String(), "candidate", cand.Name)
	}
	var out registry.WriteResult
	switch {
	case p.create != nil:
		out, err = c.reg.Create(ctx, c.leaseRes, namespace, p.create, registry.WriteOptions{Manager: manager})
	case p.update != nil:
		out, err = c.reg.Update(ctx, c.leaseRes, namespace, name, "", p.update, registry.WriteOptions{Manager: manager})
	default:
		return next
	}
	if err != nil {
		retry(fmt.Sprintf("writing lease (%s)", p.why), err)
		return next
	}
	c.leases.Observe(out.Object)
	c.log.Info("lease "+p.why, "lease", k.String())
	return next
}

// lease returns the Lease k, nil when there is none: the mirror's, or,
// when it holds none (it keeps only Leases it has seen with candidates,
// and a candidate may come first), the registry's.
func (c *controller) lease(ctx context.Context, k types.NamespacedName) (*coordinationv1.Lease, error) {
	if o := c.leases.Get(k.Namespace, k.Name); o != nil {
		return o.(*coordinationv1.Lease), nil
	}
	got, err := c.reg.Get(ctx, c.leaseRes, k.Namespace, k.Name, "")
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	obj := got.Object()
	c.leases.Observe(obj)
	return obj.(*coordinationv1.Lease), nil
}

// collect deletes the candidates not renewed for candidateExpiry (by
// their creation when they never were), as kube-apiserver's
// LeaseCandidate garbage collector does. The delete is conditional on
// the state read, so a candidate renewed meanwhile stays.
func (c *controller) collect(ctx context.Context, now time.Time) {
	for _, o := range c.cands.All() {
		cand := o.(*coordinationv1beta1.LeaseCandidate)
		last := cand.CreationTimestamp.Time
		if cand.Spec.RenewTime != nil {
			last = cand.Spec.RenewTime.Time
		}
		if !last.Add(candidateExpiry).Before(now) {
			continue
		}
		uid, rv := cand.UID, cand.ResourceVersion
		_, err := c.reg.Delete(ctx, c.candRes, cand.Namespace, cand.Name, &metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		})
		switch {
		case err == nil:
			c.log.Info("deleted expired candidate", "candidate", controllers.KeyOf(cand).String(), "renewed", last)
		case ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			c.log.Warn("deleting expired candidate", "candidate", controllers.KeyOf(cand).String(), "err", err)
		}
	}
}
