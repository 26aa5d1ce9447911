package endpointslicemirroring

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

const (
	// Name names the controller in logs and in the Lease that elects it
	// (kube-system/leasehold-endpointslice-mirroring).
	Name = "endpointslice-mirroring"
	// ControllerName is the endpointslice.kubernetes.io/managed-by value
	// of mirrored slices: kube-controller-manager's, so that either
	// controller recognises the other's slices.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// component is the source of the controller's Events.
	component = "endpoint-slice-mirroring-controller"
	// manager is the field manager of the controller's writes.
	manager = "leasehold"
	// maxEndpointsPerSubset is kube-controller-manager's
	// --mirroring-max-endpoints-per-subset default.
	maxEndpointsPerSubset = 1000
	// workers is how many Endpoints are mirrored at once
	// (--mirroring-concurrent-service-endpoint-syncs).
	workers = 5
	// A failed Endpoints is tried again after 1 s, doubling to 100 s, as
	// there.
	retryFirst = time.Second
	retryMax   = 100 * time.Second
)

// Reasons of the controller's Events; the first two are upstream's.
const (
	reasonInvalidIP      = "InvalidIPAddress"
	reasonTooMany        = "TooManyAddressesToMirror"
	reasonFailedToMirror = "FailedToMirror"
)

// Kinds the controller needs served.
var (
	EndpointsKind     = schema.GroupKind{Kind: "Endpoints"}
	EndpointSliceKind = schema.GroupKind{Group: discoveryv1.GroupName, Kind: "EndpointSlice"}
)

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
			rec, stop := controllers.NewRecorder(reg, component)
			defer stop()
			c.recorder = rec
			return c.run(ctx)
		},
	}
}

// controller mirrors Endpoints. Two mirrors follow Endpoints and
// EndpointSlices; each change queues the Endpoints it concerns, and a
// worker takes the queued ones when due and mirrors each (reconcile),
// several at once.
type controller struct {
	reg               *registry.Registry
	log               *slog.Logger
	now               func() time.Time
	recorder          record.EventRecorder
	epRes, sliceRes   resources.Resource
	endpoints, slices *controllers.Mirror // slices indexed by the Endpoints they mirror
	queue             *controllers.Queue[types.NamespacedName]

	mu sync.Mutex // guards expected
	// expected holds the slices this controller wrote, by namespace/name,
	// with the resourceVersion written ("" for a delete): their watch
	// events are its own and queue nothing.
	expected map[types.NamespacedName]string
}

func newController(reg *registry.Registry, log *slog.Logger, now func() time.Time) (*controller, error) {
	epRes, ok := reg.ResourceFor(EndpointsKind)
	if !ok {
		return nil, errors.New("endpoints are not served")
	}
	sliceRes, ok := reg.ResourceFor(EndpointSliceKind)
	if !ok {
		return nil, errors.New("endpointslices are not served")
	}
	c := &controller{
		reg: reg, log: log, now: now, epRes: epRes, sliceRes: sliceRes,
		queue:    controllers.NewQueue[types.NamespacedName](),
		expected: map[types.NamespacedName]string{},
		recorder: &record.FakeRecorder{},
	}
	c.endpoints = controllers.NewMirror(reg, epRes, log, nil, func(obj, _ resources.Object) {
		c.queue.Add(controllers.KeyOf(obj), c.now())
	})
	c.slices = controllers.NewMirror(reg, sliceRes, log, mirroredFor, c.sliceChanged)
	return c, nil
}

// mirroredFor indexes this controller's slices by the Endpoints they
// mirror.
func mirroredFor(obj resources.Object) (types.NamespacedName, bool) {
	l := obj.GetLabels()
	name := l[discoveryv1.LabelServiceName]
	if name == "" || l[discoveryv1.LabelManagedBy] != ControllerName {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, true
}

// sliceChanged queues the Endpoints a changed slice names, before and
// after the change (its labels may have moved it), unless the change is
// this controller's own write. Slices of other managers are queued too:
// one that was this controller's until its managed-by label changed must
// be replaced.
func (c *controller) sliceChanged(obj, old resources.Object) {
	k := controllers.KeyOf(obj)
	c.mu.Lock()
	rv, ok := c.expected[k]
	if ok {
		gone := c.slices.Get(k.Namespace, k.Name) == nil
		if (gone && rv == "") || (!gone && rv == obj.GetResourceVersion()) {
			delete(c.expected, k)
			c.mu.Unlock()
			return
		}
	}
	c.mu.Unlock()
	now := c.now()
	for _, o := range []resources.Object{obj, old} {
		if o == nil {
			continue
		}
		if name := o.GetLabels()[discoveryv1.LabelServiceName]; name != "" {
			c.queue.Add(types.NamespacedName{Namespace: o.GetNamespace(), Name: name}, now)
		}
	}
}

// expect records a write of this controller to slice k: rv as written,
// "" for a delete.
func (c *controller) expect(k types.NamespacedName, rv string) {
	c.mu.Lock()
	c.expected[k] = rv
	c.mu.Unlock()
}

func (c *controller) run(ctx context.Context) error {
	return controllers.RunMirrored(ctx, []*controllers.Mirror{c.endpoints, c.slices}, c.work)
}

// work mirrors the queued Endpoints as they fall due, until ctx ends.
func (c *controller) work(ctx context.Context) error {
	return c.queue.Work(ctx, c.now, workers, func(k types.NamespacedName) { c.sync(ctx, k) })
}

// sync mirrors the Endpoints k, and queues it again after a failure.
func (c *controller) sync(ctx context.Context, k types.NamespacedName) {
	err := c.reconcile(ctx, k)
	if err == nil || ctx.Err() != nil {
		c.queue.Forget(k)
		return
	}
	delay := c.queue.Retry(k, c.now(), retryFirst, retryMax)
	c.log.Info("mirroring Endpoints failed; retrying", "endpoints", k.String(), "retry", delay, "err", err)
}

// mirrored returns the slices this controller made for the Endpoints k,
// by name.
func (c *controller) mirrored(k types.NamespacedName) []*discoveryv1.EndpointSlice {
	objs := c.slices.ByIndex(k)
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*discoveryv1.EndpointSlice))
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// shouldMirror: an Endpoints labelled endpointslice.kubernetes.io/skip-mirror
// "true", or one used as a leader election lock, is not mirrored.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, lock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !lock
}
