// Package garbagecollector is kube-controller-manager's garbage
// collector: it deletes the objects whose owners
// (metadata.ownerReferences) are all gone, and carries out the two
// deletions that wait for it.
//
//   - Background (the default): the owner goes at once; its dependents
//     follow once the collector sees it gone and confirms it absent.
//   - Foreground: the registry marks the owner (deletionTimestamp and the
//     foregroundDeletion finalizer); the collector deletes its
//     dependents, those with dependents of their own in the foreground
//     too, and removes the finalizer once no dependent whose reference
//     has blockOwnerDeletion is left, so that the owner goes last.
//   - Orphan: the registry marks the owner with the orphan finalizer; the
//     collector removes the owner's reference from each dependent, then
//     the finalizer.
//
// An object whose owner does not exist (another UID under the name, or
// none, in the object's namespace for a namespaced owner) is deleted
// once a consistent read confirms the owner absent, with the policy its
// own finalizers ask for. Owner references to a kind not served, or
// from a cluster-scoped object to a namespaced kind, cannot be resolved:
// such an object is never collected, as upstream.
//
// What it keeps (graph.go): a node for each object that has owners or a
// finalizer of the collector, holding the registry's own strings and
// reference list, and for each owner the set of its dependents' UIDs.
// An object that owns nothing and is owned by nothing costs no memory,
// and its writes (a Lease's renewals) one map lookup each. Nothing
// scans the objects on an event: an owner's deletion finds its
// dependents in the index. Only a list after a watch was lost (410) goes
// over the nodes, to catch the deletions it missed.
//
// A reference whose owner's UID is found under its name in another
// namespace (a namespaced dependent's, or any for a cluster-scoped
// dependent of a namespaced kind) gets upstream's OwnerRefInvalidNamespace
// Warning Event; upstream finds the UID in its graph of every object,
// leasehold looks the name up in each namespace, only when the owner is
// not where the reference says. A reference to a kind not served is
// checked again when the object's references change or after a list,
// not retried in a loop.
//
// It is a singleton on etcd.
package garbagecollector

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

const (
	// Name names the controller in logs and in its Lease.
	Name = "garbage-collector"
	// component is the source of its Events, upstream's.
	component = "garbage-collector-controller"
	// manager is the field manager of the collector's updates.
	manager = "leasehold"
	// workers is how many objects are looked at at once: each look is
	// a few registry calls, each a round trip to etcd on that engine.
	workers = 8
	// pace batches each kind's events: the collector acts within it,
	// and a kind written thousands of times a second (Lease renewals)
	// wakes it a few times a second.
	pace = 50 * time.Millisecond
	// retryFirst and retryMax bound the backoff of a failed look.
	retryFirst, retryMax = 50 * time.Millisecond, time.Minute
)

// Collector is the garbage collector, and the collector of its metrics.
type Collector struct {
	reg   *registry.Registry
	log   *slog.Logger
	now   func() time.Time
	graph *graph
	queue *controllers.Queue[types.UID]
	// recorder is set while the collector runs.
	recorder record.EventRecorder

	deletions          prometheus.Counter
	nodesDesc, ownDesc *prometheus.Desc
}

// New returns the collector of every kind reg serves.
func New(reg *registry.Registry, log *slog.Logger) *Collector {
	return &Collector{
		reg: reg, log: log.With("controller", Name), now: time.Now, graph: newGraph(),
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_garbage_collector_deletions_total",
			Help: "Objects the garbage collector deleted because their owners were gone or being deleted in the foreground.",
		}),
		nodesDesc: prometheus.NewDesc("leasehold_garbage_collector_objects",
			"Objects the garbage collector keeps track of: those with ownerReferences or one of its finalizers.", nil, nil),
		ownDesc: prometheus.NewDesc("leasehold_garbage_collector_owners",
			"Owners the garbage collector keeps the dependents of.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.deletions.Describe(ch)
	ch <- c.nodesDesc
	ch <- c.ownDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.deletions.Collect(ch)
	nodes, owners := c.graph.size()
	ch <- prometheus.MustNewConstMetric(c.nodesDesc, prometheus.GaugeValue, float64(nodes))
	ch <- prometheus.MustNewConstMetric(c.ownDesc, prometheus.GaugeValue, float64(owners))
}

// Controller returns the collector as a singleton controller.
func (c *Collector) Controller() controllers.Controller {
	return controllers.Controller{Name: Name, Singleton: true, Run: c.run}
}

func (c *Collector) run(ctx context.Context) error {
	// A run that starts (again) builds its graph from the lists.
	c.graph.reset()
	c.queue = controllers.NewQueue[types.UID]()
	rec, stop := controllers.NewRecorder(c.reg, component)
	defer stop()
	c.recorder = rec
	g, gctx := errgroup.WithContext(ctx)
	var synced sync.WaitGroup
	for _, k := range c.reg.Kinds() {
		res := k.Storage()
		f := &follower{c: c, res: res, synced: synced.Done}
		synced.Add(1)
		g.Go(func() error {
			return (&controllers.Follower{Registry: c.reg, Resource: res, Log: c.log, Listing: f.listing, Apply: f.apply, Pace: pace}).Run(gctx)
		})
	}
	g.Go(func() error {
		done := make(chan struct{})
		go func() { synced.Wait(); close(done) }()
		select {
		case <-done:
		case <-gctx.Done():
			return nil
		}
		return c.work(gctx)
	})
	return g.Wait()
}

// follower applies one kind's events to the graph.
type follower struct {
	c   *Collector
	res resources.Resource
	// seen holds the UIDs a list in progress has brought.
	seen   map[types.UID]struct{}
	synced func() // called once, after the first list
}

func (f *follower) listing() { f.seen = map[types.UID]struct{}{} }

func (f *follower) apply(events []registry.Event) {
	now := f.c.now()
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				f.listed(now)
			}
			continue
		}
		obj := ev.Object.Object()
		if f.seen != nil {
			f.seen[obj.GetUID()] = struct{}{}
		}
		for _, uid := range f.c.graph.observe(f.res, obj, ev.Type == watch.Deleted) {
			f.c.queue.Add(uid, now)
		}
	}
}

// listed ends a list: nodes it did not bring were deleted meanwhile, and
// so may have been owners of this kind.
func (f *follower) listed(now time.Time) {
	gk := schema.GroupKind{Group: f.res.Version.Group, Kind: f.res.Kind.Names.Kind}
	gone, referring := f.c.graph.afterList(f.res, f.seen, gk)
	for _, n := range gone {
		obj := f.res.New()
		obj.SetNamespace(n.namespace)
		obj.SetName(n.name)
		obj.SetUID(n.uid)
		for _, uid := range f.c.graph.observe(f.res, obj, true) {
			f.c.queue.Add(uid, now)
		}
	}
	for _, uid := range referring {
		f.c.queue.Add(uid, now)
	}
	f.seen = nil
	if f.synced != nil {
		f.synced()
		f.synced = nil
	}
}

// work looks at the queued objects as they fall due, until ctx ends.
func (c *Collector) work(ctx context.Context) error {
	err := c.queue.Work(ctx, c.now, workers, func(uid types.UID) {
		err := c.attend(ctx, uid)
		switch {
		case err == nil:
			c.queue.Forget(uid)
		case ctx.Err() == nil:
			d := c.queue.Retry(uid, c.now(), retryFirst, retryMax)
			c.log.Info("garbage collection failed; trying again", "uid", uid, "after", d, "err", err)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// attend does what one object's node asks for.
func (c *Collector) attend(ctx context.Context, uid types.UID) error {
	n := c.graph.get(uid)
	switch {
	case n == nil:
		return nil
	case n.deleting && n.orphan:
		return c.orphanDependents(ctx, n)
	case n.waitsForDependents():
		return c.deleteDependents(ctx, n)
	case n.deleting:
		// Its deletion is under way: its dependents are looked at once
		// it is gone.
		return nil
	default:
		return c.collect(ctx, n)
	}
}

// latest reads n's object from the cache, at least as new as the
// collector's events; nil when it is gone or is another object under the
// same name. Every write made from it is conditioned on its
// resourceVersion, so a state the store has since left only costs a
// retry.
func (c *Collector) latest(ctx context.Context, n *node) (resources.Object, error) {
	o, err := c.reg.Get(ctx, n.res, n.namespace, n.name, "0")
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if o.Object().GetUID() != n.uid {
		return nil, nil
	}
	return o.Object(), nil
}

// collect deletes n's object when none of its owners exists, or removes
// its references to owners that are gone while another exists
// (attemptToDeleteItem).
func (c *Collector) collect(ctx context.Context, n *node) error {
	obj, err := c.latest(ctx, n)
	if obj == nil || err != nil || obj.GetDeletionTimestamp() != nil {
		return err
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	var solid, dangling, waiting []types.UID
	for _, r := range refs {
		state, err := c.owner(ctx, obj, r)
		if err != nil {
			return err
		}
		switch state {
		case ownerExists:
			solid = append(solid, r.UID)
		case ownerAbsent:
			dangling = append(dangling, r.UID)
		case ownerWaits:
			waiting = append(waiting, r.UID)
		}
	}
	switch {
	case len(solid) > 0:
		if len(dangling)+len(waiting) == 0 {
			return nil
		}
		// A reference to an owner in a foreground deletion goes too, or
		// the owner would wait for an object that stays.
		drop := append(dangling, waiting...)
		_, err := c.update(ctx, n, obj, func(o resources.Object) bool {
			return setOwners(o, slices.DeleteFunc(slices.Clone(o.GetOwnerReferences()), func(r metav1.OwnerReference) bool { return slices.Contains(drop, r.UID) }))
		})
		return err
	case len(waiting) > 0 && c.graph.hasDependents(n.uid):
		// An owner waits for this object, which has dependents of its
		// own: they go first, in a foreground deletion of this one. A
		// dependent that itself waits for its dependents could close a
		// cycle; this object's references stop blocking first.
		for _, d := range c.graph.dependentNodes(n.uid) {
			if d.waitsForDependents() {
				if obj, err = c.update(ctx, n, obj, unblock); obj == nil || err != nil {
					return err
				}
				break
			}
		}
		return c.delete(ctx, n, obj, metav1.DeletePropagationForeground)
	case len(dangling)+len(waiting) == 0:
		// Every owner is of a kind not served, or cannot be resolved.
		return nil
	default:
		policy := metav1.DeletePropagationBackground
		switch fs := obj.GetFinalizers(); {
		case slices.Contains(fs, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case slices.Contains(fs, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		return c.delete(ctx, n, obj, policy)
	}
}

// ownerState is what a reference's owner is to the collector.
type ownerState int

const (
	ownerExists ownerState = iota
	ownerAbsent
	// ownerWaits: the owner is in a foreground deletion.
	ownerWaits
	// ownerUnknown: the reference cannot be resolved (a kind not served,
	// a namespaced owner of a cluster-scoped object).
	ownerUnknown
)

// owner looks up the owner r names for dependent: in the dependent's
// namespace when the owner's kind is namespaced. The cache answers when
// it holds the owner; that it is absent is confirmed by a consistent
// read.
func (c *Collector) owner(ctx context.Context, dependent resources.Object, r metav1.OwnerReference) (ownerState, error) {
	res, ok := c.reg.ResourceFor(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).GroupKind())
	if !ok {
		return ownerUnknown, nil
	}
	namespace := ""
	if res.Kind.Namespaced {
		if namespace = dependent.GetNamespace(); namespace == "" {
			c.reportElsewhere(dependent, res, r)
			return ownerUnknown, nil
		}
	}
	var owner resources.Object
	o, err := c.reg.Get(ctx, res, namespace, r.Name, "0")
	if err == nil {
		owner = o.Object()
	}
	if err != nil || owner.GetUID() != r.UID {
		if o, err = c.reg.Get(ctx, res, namespace, r.Name, ""); err == nil {
			owner = o.Object()
		}
	}
	switch {
	case apierrors.IsNotFound(err) || err == nil && owner.GetUID() != r.UID:
		if res.Kind.Namespaced {
			c.reportElsewhere(dependent, res, r)
		}
		return ownerAbsent, nil
	case err != nil:
		return ownerExists, err
	case owner.GetDeletionTimestamp() != nil && slices.Contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents) && c.graph.waits(r.UID):
		// The registry's answer may be newer than the graph: a
		// dependent created before the owner's mark, which makes this
		// object go in the foreground too, may not be in it yet. Until
		// the graph has the mark (and so every earlier object of its
		// kind), the owner exists; observing the mark looks at this
		// object again.
		return ownerWaits, nil
	}
	return ownerExists, nil
}

// reportElsewhere tells, in a Warning Event on dependent, that the owner
// r names (of the namespaced resource res) exists in another namespace
// than the dependent's, which a reference cannot reach.
func (c *Collector) reportElsewhere(dependent resources.Object, res resources.Resource, r metav1.OwnerReference) {
	namespaces, ok := c.reg.ResourceFor(schema.GroupKind{Kind: "Namespace"})
	if !ok {
		return
	}
	all, ok := c.reg.Snapshot(namespaces)
	owners, ok2 := c.reg.Snapshot(res)
	if !ok || !ok2 {
		return
	}
	found := false
	all.Each("", func(ns resources.Object) bool {
		if ns.GetName() == dependent.GetNamespace() {
			return true
		}
		o, ok := owners.Get(ns.GetName(), r.Name)
		found = ok && o.GetUID() == r.UID
		return !found
	})
	if found {
		c.recorder.Eventf(dependent, corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] does not exist in namespace %q",
			r.APIVersion, r.Kind, dependent.GetNamespace(), r.Name, r.UID, dependent.GetNamespace())
	}
}

// deleteDependents carries a foreground deletion of owner on: its
// finalizer goes once no dependent blocks it, else the blocking
// dependents are looked at (processDeletingDependentsItem).
func (c *Collector) deleteDependents(ctx context.Context, owner *node) error {
	blocking := 0
	now := c.now()
	for _, d := range c.graph.dependentNodes(owner.uid) {
		if !d.blocks(owner.uid) {
			continue
		}
		blocking++
		if !d.waitsForDependents() {
			c.queue.Add(d.uid, now)
		}
	}
	if blocking > 0 {
		return nil
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
}

// orphanDependents removes owner's reference from each of its
// dependents, then its orphan finalizer.
func (c *Collector) orphanDependents(ctx context.Context, owner *node) error {
	for _, d := range c.graph.dependentNodes(owner.uid) {
		obj, err := c.latest(ctx, d)
		if err != nil {
			return err
		}
		if obj == nil {
			continue
		}
		_, err = c.update(ctx, d, obj, func(o resources.Object) bool {
			return setOwners(o, slices.DeleteFunc(slices.Clone(o.GetOwnerReferences()), func(r metav1.OwnerReference) bool { return r.UID == owner.uid }))
		})
		if err != nil {
			return err
		}
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// removeFinalizer removes finalizer f from n's object; the registry
// deletes the object when it was the last.
func (c *Collector) removeFinalizer(ctx context.Context, n *node, f string) error {
	obj, err := c.latest(ctx, n)
	if obj == nil || err != nil {
		return err
	}
	_, err = c.update(ctx, n, obj, func(o resources.Object) bool {
		fs := o.GetFinalizers()
		if !slices.Contains(fs, f) {
			return false
		}
		o.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(s string) bool { return s == f }))
		return true
	})
	return err
}

// update writes obj as change leaves a copy of it, conditioned on obj's
// resourceVersion: a conflict is an error, and the object is looked at
// again. change returns false when there is nothing to write. It returns
// the object as it now is (obj when nothing was written; nil when gone).
func (c *Collector) update(ctx context.Context, n *node, obj resources.Object, change func(resources.Object) bool) (resources.Object, error) {
	cp := obj.DeepCopyObject().(resources.Object)
	if !change(cp) {
		return obj, nil
	}
	out, err := c.reg.Update(ctx, n.res, n.namespace, n.name, "", cp, registry.WriteOptions{Manager: manager})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out.Object, nil
}

// setOwners sets o's references, reporting whether they changed.
func setOwners(o resources.Object, refs []metav1.OwnerReference) bool {
	if len(refs) == len(o.GetOwnerReferences()) {
		return false
	}
	o.SetOwnerReferences(refs)
	return true
}

// unblock makes every reference of o stop blocking its owner's
// deletion.
func unblock(o resources.Object) bool {
	refs := slices.Clone(o.GetOwnerReferences())
	changed := false
	for i := range refs {
		if isTrue(refs[i].BlockOwnerDeletion) {
			refs[i].BlockOwnerDeletion = new(bool)
			changed = true
		}
	}
	o.SetOwnerReferences(refs)
	return changed
}

// delete deletes n's object with policy, conditioned on its UID and on
// obj's resourceVersion; when only fields other than its references
// changed meanwhile (a Lease renewed), on its UID alone (deleteObject).
func (c *Collector) delete(ctx context.Context, n *node, obj resources.Object, policy metav1.DeletionPropagation) error {
	uid, rv := n.uid, obj.GetResourceVersion()
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &policy}
	_, err := c.reg.Delete(ctx, n.res, n.namespace, n.name, opts)
	if apierrors.IsConflict(err) {
		live, lerr := c.latest(ctx, n)
		if lerr != nil || live == nil {
			return lerr
		}
		if !sameOwners(live.GetOwnerReferences(), obj.GetOwnerReferences()) {
			return err
		}
		opts.Preconditions.ResourceVersion = nil
		_, err = c.reg.Delete(ctx, n.res, n.namespace, n.name, opts)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		c.deletions.Inc()
		c.log.Debug("collected", "resource", n.res.GroupResource().String(), "namespace", n.namespace, "name", n.name, "policy", policy)
	}
	return err
}
