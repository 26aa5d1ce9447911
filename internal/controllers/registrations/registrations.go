// Package registrations turns held Leases into EndpointSlices: a Lease
// labelled leasehold.dev/service names a service, its annotations an
// endpoint of it (leasehold.dev/addresses, leasehold.dev/ports, and
// optionally leasehold.dev/zone and leasehold.dev/hostname), and while
// the Lease is held and unexpired the endpoint is in the service's
// slices (labelled kubernetes.io/service-name, managed by
// registrations.leasehold.dev), as the endpointslice controller puts a
// ready Pod in its Service's slices. `leasehold register` writes such
// Leases.
//
// A registration is live while its holderIdentity is set and the server
// has seen its spec.renewTime change within leaseDurationSeconds: by the
// server's clock, from when it saw the change (or first saw the Lease,
// after a restart too), never the renewTime's value, which is the
// holder's clock. An expired registration leaves its slice at its
// deadline (a min-heap of them queues the service), a renewal brings it
// back.
//
// Slices hold at most 100 endpoints, one address type and one port set
// each. A service's endpoints stay in the slice they are in while they
// live; new ones go where there is room, new slices only when none has;
// a slice left empty is deleted, but the last one of a service stays,
// empty, so that a client watching it sees its endpoints go. Each
// endpoint's targetRef names its Lease.
package registrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

// The label and annotations of a registration Lease.
const (
	LabelService        = "leasehold.dev/service"
	AnnotationAddresses = "leasehold.dev/addresses" // comma-separated, one family
	AnnotationPorts     = "leasehold.dev/ports"     // NAME:PORT/PROTOCOL, comma-separated; NAME and /PROTOCOL optional
	AnnotationZone      = "leasehold.dev/zone"
	AnnotationHostname  = "leasehold.dev/hostname"
)

const (
	// Name names the controller in logs and in its Lease.
	Name = "registrations"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of
	// the slices made from registrations.
	ManagedBy = "registrations.leasehold.dev"
	// maxEndpoints is how many endpoints a slice holds, as the
	// endpointslice controller's default --max-endpoints-per-slice.
	maxEndpoints = 100
	manager      = "leasehold"
	component    = "leasehold-registrations"
	// batch is how long a service waits after a registration came, went
	// or expired before its slices are written: the changes of that time
	// make one write, as the endpointslice controller's batch period
	// does, not one reconcile each.
	batch      = 200 * time.Millisecond
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// New returns the controller, a singleton.
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

// registration is what a Lease labelled leasehold.dev/service
// contributes to its service.
type registration struct {
	service  types.NamespacedName
	endpoint discoveryv1.Endpoint // targetRef names the Lease
	group    groupKey
	ports    []discoveryv1.EndpointPort
	seen     controllers.Renewal
	duration time.Duration
	held     bool
	gen      int
}

func (r *registration) deadline() time.Time { return r.seen.At.Add(r.duration) }

func (r *registration) live(now time.Time) bool { return r.held && r.deadline().After(now) }

// groupKey is a slice's address type and port set.
type groupKey struct {
	at    discoveryv1.AddressType
	ports string // the ports annotation, canonical
}

type controller struct {
	reg      *registry.Registry
	log      *slog.Logger
	now      func() time.Time
	leaseRes resources.Resource
	sliceRes resources.Resource
	slices   *controllers.Mirror
	queue    *controllers.Queue[types.NamespacedName]
	listed   chan struct{} // closed after the first list of Leases

	mu sync.Mutex // guards the fields below
	// regs holds the registrations by Lease; byService their Leases by
	// service.
	regs      map[types.NamespacedName]*registration
	byService map[types.NamespacedName]map[types.NamespacedName]bool
	// due holds the registrations' deadlines, some stale.
	due controllers.Deadlines
	gen int
	// invalid remembers the error reported of each invalid registration.
	invalid  map[types.NamespacedName]string
	recorder record.EventRecorder
}

func newController(reg *registry.Registry, log *slog.Logger, now func() time.Time) (*controller, error) {
	leaseRes, ok := reg.ResourceFor(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"})
	if !ok {
		return nil, errors.New("leases are not served")
	}
	sliceRes, ok := reg.ResourceFor(schema.GroupKind{Group: discoveryv1.GroupName, Kind: "EndpointSlice"})
	if !ok {
		return nil, errors.New("endpointslices are not served")
	}
	c := &controller{
		reg: reg, log: log, now: now, leaseRes: leaseRes, sliceRes: sliceRes,
		queue:     controllers.NewQueue[types.NamespacedName](),
		listed:    make(chan struct{}),
		regs:      map[types.NamespacedName]*registration{},
		byService: map[types.NamespacedName]map[types.NamespacedName]bool{},
		invalid:   map[types.NamespacedName]string{},
		recorder:  &record.FakeRecorder{},
	}
	c.slices = controllers.NewMirror(reg, sliceRes, log, ours, func(obj, old resources.Object) {
		for _, o := range []resources.Object{obj, old} {
			if k, ok := ours(o); ok {
				c.queue.Add(k, c.now())
			}
		}
	})
	// Only this controller's slices are read (ByIndex).
	c.slices.Keep = func(obj resources.Object) bool { _, ok := ours(obj); return ok }
	return c, nil
}

// ours indexes this controller's slices by service.
func ours(obj resources.Object) (types.NamespacedName, bool) {
	if obj == nil {
		return types.NamespacedName{}, false
	}
	l := obj.GetLabels()
	if l[discoveryv1.LabelManagedBy] != ManagedBy || l[discoveryv1.LabelServiceName] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: l[discoveryv1.LabelServiceName]}, true
}

func (c *controller) run(ctx context.Context) error {
	rec, stop := controllers.NewRecorder(c.reg, component)
	defer stop()
	c.mu.Lock()
	c.recorder = rec
	c.mu.Unlock()
	f := &controllers.Follower{Registry: c.reg, Resource: c.leaseRes, Log: c.log, Listing: c.listing, Apply: c.apply}
	return controllers.RunMirrored(ctx, []*controllers.Mirror{c.slices}, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- f.Run(ctx) }()
		select {
		case <-c.listed:
		case err := <-errc:
			return err
		}
		go func() { errc <- c.work(ctx) }()
		return <-errc
	})
}

func (c *controller) listing() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// apply notes the Leases' changes. A renewal only moves a deadline; the
// service is queued when an endpoint comes, goes or changes.
func (c *controller) apply(events []registry.Event) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			if ev.InitialEnd {
				for k, r := range c.regs {
					if r.gen != c.gen {
						c.removeLocked(k, r)
					}
				}
				select {
				case <-c.listed:
				default:
					close(c.listed)
				}
			}
			continue
		}
		lease := ev.Object.Object().(*coordinationv1.Lease)
		k := controllers.KeyOf(lease)
		old := c.regs[k]
		var r *registration
		if ev.Type != watch.Deleted {
			var err error
			if r, err = parse(lease); err != nil && c.invalid[k] != err.Error() {
				c.invalid[k] = err.Error()
				c.recorder.Eventf(lease, corev1.EventTypeWarning, "InvalidRegistration", "Not an endpoint of service %s: %v", lease.Labels[LabelService], err)
			} else if err == nil {
				delete(c.invalid, k)
			}
		}
		if r == nil {
			if old != nil {
				c.removeLocked(k, old)
			}
			continue
		}
		r.gen = c.gen
		if old != nil && old.service == r.service {
			r.seen = old.seen
		}
		r.seen = r.seen.Next(lease, now)
		if old != nil && old.service != r.service {
			c.removeLocked(k, old)
			old = nil
		}
		c.regs[k] = r
		if c.byService[r.service] == nil {
			c.byService[r.service] = map[types.NamespacedName]bool{}
		}
		c.byService[r.service][k] = true
		c.due.Push(r.deadline(), k)
		if old == nil || old.live(now) != r.live(now) || old.group != r.group || !equalEndpoint(&old.endpoint, &r.endpoint) {
			c.queue.Add(r.service, now.Add(batch))
		}
	}
	c.due.Compact(len(c.regs), func(push func(time.Time, types.NamespacedName)) {
		for k, r := range c.regs {
			push(r.deadline(), k)
		}
	})
}

func (c *controller) removeLocked(k types.NamespacedName, r *registration) {
	delete(c.regs, k)
	delete(c.byService[r.service], k)
	if len(c.byService[r.service]) == 0 {
		delete(c.byService, r.service)
	}
	c.queue.Add(r.service, c.now().Add(batch))
}

func equalEndpoint(a, b *discoveryv1.Endpoint) bool {
	return slices.Equal(a.Addresses, b.Addresses) && ptrEqual(a.Zone, b.Zone) && ptrEqual(a.Hostname, b.Hostname) && a.TargetRef.UID == b.TargetRef.UID
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// work reconciles the queued services, and queues those whose
// registrations expire, until ctx ends.
func (c *controller) work(ctx context.Context) error {
	for {
		now := c.now()
		c.mu.Lock()
		for _, lk := range c.due.PopDue(now) {
			if r := c.regs[lk]; r != nil && !r.deadline().After(now) {
				c.queue.Add(r.service, now.Add(batch))
			}
		}
		nextDeadline := c.due.Next()
		c.mu.Unlock()
		ready, next := c.queue.Due(now)
		for _, k := range ready {
			c.sync(ctx, k)
		}
		if len(ready) > 0 {
			continue
		}
		if next.IsZero() || (!nextDeadline.IsZero() && nextDeadline.Before(next)) {
			next = nextDeadline
		}
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = max(next.Sub(c.now()), 0)
		}
		if err := c.queue.Wait(ctx, wait); err != nil {
			return err
		}
	}
}

// sync reconciles service k, and queues it again after a failure.
func (c *controller) sync(ctx context.Context, k types.NamespacedName) {
	err := c.reconcile(ctx, k)
	if err == nil || ctx.Err() != nil {
		c.queue.Forget(k)
		return
	}
	delay := c.queue.Retry(k, c.now(), retryFirst, retryMax)
	c.log.Info("writing a service's slices failed; retrying", "service", k.String(), "retry", delay, "err", err)
}

// reconcile makes the slices of service k hold its live registrations.
func (c *controller) reconcile(ctx context.Context, k types.NamespacedName) error {
	now := c.now()
	c.mu.Lock()
	var live []*registration
	for lk := range c.byService[k] {
		if r := c.regs[lk]; r.live(now) {
			live = append(live, r)
		}
	}
	c.mu.Unlock()
	var existing []*discoveryv1.EndpointSlice
	for _, o := range c.slices.ByIndex(k) {
		existing = append(existing, o.(*discoveryv1.EndpointSlice))
	}
	p := pack(k, live, existing)
	opts := registry.WriteOptions{Manager: manager}
	for _, s := range p.create {
		out, err := c.reg.Create(ctx, c.sliceRes, k.Namespace, s, opts)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("creating a slice: %w", err)
		}
		c.slices.Observe(out.Object)
	}
	for _, s := range p.update {
		out, err := c.reg.Update(ctx, c.sliceRes, k.Namespace, s.Name, "", s, opts)
		if err != nil {
			return fmt.Errorf("updating slice %s: %w", s.Name, err)
		}
		c.slices.Observe(out.Object)
	}
	for _, s := range p.remove {
		uid := s.UID
		_, err := c.reg.Delete(ctx, c.sliceRes, k.Namespace, s.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting slice %s: %w", s.Name, err)
		}
	}
	if !p.empty() {
		c.log.Debug("wrote a service's slices", "service", k.String(), "endpoints", len(live), "created", len(p.create), "updated", len(p.update), "deleted", len(p.remove))
	}
	return nil
}

// plan is the writes that bring a service's slices up to date.
type plan struct{ create, update, remove []*discoveryv1.EndpointSlice }

func (p *plan) empty() bool { return len(p.create)+len(p.update)+len(p.remove) == 0 }

// pack places the live registrations of service k in its slices, with
// as few writes as it can: an endpoint stays in the slice it is in, new
// ones fill slices with room (those written anyway first), then new
// slices. A slice left empty goes, but a service keeps one slice.
func pack(k types.NamespacedName, live []*registration, existing []*discoveryv1.EndpointSlice) plan {
	slices.SortFunc(existing, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(live, func(a, b *registration) int {
		return strings.Compare(a.endpoint.TargetRef.Name, b.endpoint.TargetRef.Name)
	})
	type work struct {
		slice     *discoveryv1.EndpointSlice // a copy when written
		endpoints []discoveryv1.Endpoint
		changed   bool
	}
	desired := map[groupKey]map[string]*registration{}
	portsOf := map[groupKey][]discoveryv1.EndpointPort{}
	var order []groupKey
	for _, r := range live {
		if desired[r.group] == nil {
			desired[r.group] = map[string]*registration{}
			portsOf[r.group] = r.ports
			order = append(order, r.group)
		}
		desired[r.group][r.endpoint.TargetRef.Name] = r
	}
	var p plan
	var kept []*work // every existing slice, in name order
	byGroup := map[groupKey][]*work{}
	for _, s := range existing {
		w := &work{slice: s}
		g := groupKey{at: s.AddressType, ports: portsString(s.Ports)}
		want := desired[g]
		for _, e := range s.Endpoints {
			var name string
			if e.TargetRef != nil {
				name = e.TargetRef.Name
			}
			if r, ok := want[name]; ok {
				w.endpoints = append(w.endpoints, *r.endpoint.DeepCopy())
				w.changed = w.changed || !equalEndpoint(&r.endpoint, &e)
				delete(want, name)
			} else {
				w.changed = true
			}
		}
		kept = append(kept, w)
		byGroup[g] = append(byGroup[g], w)
	}
	for _, g := range order {
		var rest []*registration
		for _, r := range live {
			if r.group == g && desired[g][r.endpoint.TargetRef.Name] != nil {
				rest = append(rest, r)
			}
		}
		// Fill the slices written anyway first, then the others.
		ws := slices.Clone(byGroup[g])
		slices.SortStableFunc(ws, func(a, b *work) int {
			switch {
			case a.changed == b.changed:
				return 0
			case a.changed:
				return -1
			}
			return 1
		})
		for _, w := range ws {
			for len(rest) > 0 && len(w.endpoints) < maxEndpoints {
				w.endpoints = append(w.endpoints, *rest[0].endpoint.DeepCopy())
				w.changed, rest = true, rest[1:]
			}
		}
		for len(rest) > 0 {
			n := min(len(rest), maxEndpoints)
			s := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					GenerateName: k.Name + "-",
					Namespace:    k.Namespace,
					Labels:       map[string]string{discoveryv1.LabelServiceName: k.Name, discoveryv1.LabelManagedBy: ManagedBy},
				},
				AddressType: g.at,
				Ports:       slices.Clone(portsOf[g]),
			}
			for _, r := range rest[:n] {
				s.Endpoints = append(s.Endpoints, *r.endpoint.DeepCopy())
			}
			p.create = append(p.create, s)
			rest = rest[n:]
		}
	}
	// A service keeps one slice: its last, emptied, when nothing else is.
	keepOne := len(live) == 0 && len(p.create) == 0
	for i, w := range kept {
		switch {
		case len(w.endpoints) == 0 && !(keepOne && i == 0):
			p.remove = append(p.remove, w.slice)
		case w.changed:
			s := w.slice.DeepCopy()
			s.Endpoints = w.endpoints
			p.update = append(p.update, s)
		}
	}
	return p
}

// parse reads a registration from a Lease; nil without the service
// label.
func parse(lease *coordinationv1.Lease) (*registration, error) {
	service := lease.Labels[LabelService]
	if service == "" {
		return nil, nil
	}
	if lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds <= 0 {
		return nil, errors.New("no leaseDurationSeconds")
	}
	a := lease.Annotations
	var addrs []string
	var at discoveryv1.AddressType
	for _, s := range strings.Split(a[AnnotationAddresses], ",") {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("%s: %q is no IP address", AnnotationAddresses, s)
		}
		t := discoveryv1.AddressTypeIPv6
		if ip.To4() != nil {
			t = discoveryv1.AddressTypeIPv4
		}
		if at != "" && t != at {
			return nil, fmt.Errorf("%s: addresses of two families", AnnotationAddresses)
		}
		at = t
		addrs = append(addrs, ip.String())
	}
	ports, canonical, err := ParsePorts(a[AnnotationPorts])
	if err != nil {
		return nil, err
	}
	ready, serving, terminating := true, true, false
	r := &registration{
		service: types.NamespacedName{Namespace: lease.Namespace, Name: service},
		endpoint: discoveryv1.Endpoint{
			Addresses:  addrs,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
			TargetRef:  &corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: lease.Namespace, Name: lease.Name, UID: lease.UID},
		},
		group:    groupKey{at: at, ports: canonical},
		ports:    ports,
		duration: time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second,
		held:     lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "",
	}
	if z := a[AnnotationZone]; z != "" {
		r.endpoint.Zone = &z
	}
	if h := a[AnnotationHostname]; h != "" {
		r.endpoint.Hostname = &h
	}
	return r, nil
}

// ParsePorts reads the ports annotation: NAME:PORT/PROTOCOL, separated by
// commas; NAME and /PROTOCOL (TCP) may be left out. It returns the ports
// and their canonical text.
func ParsePorts(s string) ([]discoveryv1.EndpointPort, string, error) {
	var out []discoveryv1.EndpointPort
	if strings.TrimSpace(s) == "" {
		return []discoveryv1.EndpointPort{}, "", nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		name, rest, found := strings.Cut(f, ":")
		if !found {
			name, rest = "", f
		}
		num, proto, _ := strings.Cut(rest, "/")
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return nil, "", fmt.Errorf("%s: %q: the port must be a number from 1 to 65535", AnnotationPorts, f)
		}
		p := corev1.Protocol(strings.ToUpper(proto))
		if p != corev1.ProtocolTCP && p != corev1.ProtocolUDP && p != corev1.ProtocolSCTP {
			return nil, "", fmt.Errorf("%s: %q: the protocol must be TCP, UDP or SCTP", AnnotationPorts, f)
		}
		port := int32(n)
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &p})
	}
	return out, portsString(out), nil
}

// portsString is the canonical text of ports.
func portsString(ports []discoveryv1.EndpointPort) string {
	var parts []string
	for _, p := range ports {
		var name, proto string
		var n int32
		if p.Name != nil {
			name = *p.Name
		}
		if p.Port != nil {
			n = *p.Port
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		parts = append(parts, fmt.Sprintf("%s:%d/%s", name, n, proto))
	}
	return strings.Join(parts, ",")
}
