package endpointslicemirroring

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	esutil "k8s.io/endpointslice/util"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/registry"
)

// plan is the writes that make an Endpoints' slices what it mirrors to.
type plan struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

func (p *plan) empty() bool { return len(p.create)+len(p.update)+len(p.remove) == 0 }

// reconcile mirrors the Endpoints k: it creates, updates and deletes
// this controller's slices of k until they hold what k does.
func (c *controller) reconcile(ctx context.Context, k types.NamespacedName) error {
	existing := c.mirrored(k)
	var ep *corev1.Endpoints
	if o := c.endpoints.Get(k.Namespace, k.Name); o != nil {
		ep = o.(*corev1.Endpoints)
	}
	if ep == nil || !shouldMirror(ep) {
		return c.write(ctx, k, ep, &plan{remove: existing})
	}
	d := desiredFor(ep, maxEndpointsPerSubset)
	if d.invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonInvalidIP,
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", d.invalid)
	}
	if d.skipped > d.invalid {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonTooMany,
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", maxEndpointsPerSubset, d.skipped)
	}
	p := planFor(ep, d, existing)
	// An Endpoints whose slices would not all be valid mirrors to none:
	// half a service is worse than a missing one, which clients notice.
	// A plan of one write is validated by the registry as it writes,
	// before anything else is written: validating a slice of 1,000
	// endpoints twice was a third of mirroring an update of them.
	var why string
	if len(p.create)+len(p.update) > 1 {
		if errs := c.validate(&p); len(errs) > 0 {
			why = errs.ToAggregate().Error()
		}
	}
	if why == "" {
		err := c.write(ctx, k, ep, &p)
		if !apierrors.IsInvalid(err) {
			return err
		}
		why = err.Error()
	}
	c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonFailedToMirror, "Cannot mirror to EndpointSlices: %s", why)
	return c.write(ctx, k, ep, &plan{remove: existing})
}

// planFor compares the slices ep should mirror to (d) with the existing
// ones, as kube-controller-manager does: per address type and port set,
// the first existing slice is kept (rewritten when its endpoints,
// labels, annotations or owner differ) and the others deleted; a new
// slice takes the name of one to be deleted of the same address type
// rather than a new one.
func planFor(ep *corev1.Endpoints, d *desired, existing []*discoveryv1.EndpointSlice) plan {
	var p plan
	byKey := map[sliceKey][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := keyOfSlice(s)
		byKey[k] = append(byKey[k], s)
		if d.groups[k] == nil {
			p.remove = append(p.remove, s)
		}
	}
	for _, k := range d.order {
		g, have := d.groups[k], byKey[k]
		if len(g.endpoints) == 0 {
			p.remove = append(p.remove, have...)
			continue
		}
		if len(have) == 0 {
			p.create = append(p.create, newSlice(ep, k.addressType, g, ""))
			continue
		}
		p.remove = append(p.remove, have[1:]...)
		if !matches(have[0], ep, g) {
			p.update = append(p.update, newSlice(ep, k.addressType, g, have[0].Name))
		}
	}
	// Recycle: a create and a delete of one address type are an update.
	kept := p.create[:0]
	for _, s := range p.create {
		i := slices.IndexFunc(p.remove, func(r *discoveryv1.EndpointSlice) bool { return r.AddressType == s.AddressType })
		if i < 0 {
			kept = append(kept, s)
			continue
		}
		s.Name, s.GenerateName = p.remove[i].Name, ""
		p.update = append(p.update, s)
		p.remove = slices.Delete(p.remove, i, i+1)
	}
	p.create = kept
	return p
}

// matches reports whether the existing slice s already mirrors group g
// of ep: the same endpoints (as a set: identity by addresses, hostname
// and target; then node, zone, conditions and target compared), labels,
// annotations and controller reference.
func matches(s *discoveryv1.EndpointSlice, ep *corev1.Endpoints, g *group) bool {
	if len(s.Endpoints) != len(g.endpoints) {
		return false
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		want := g.set[idOf(e)]
		if want == nil || !esutil.EndpointsEqualBeyondHash(want, e) {
			return false
		}
	}
	labels := maps.Clone(s.Labels)
	delete(labels, discoveryv1.LabelManagedBy)
	delete(labels, discoveryv1.LabelServiceName)
	if !equality.Semantic.DeepEqual(labels, ep.Labels) || !equality.Semantic.DeepEqual(s.Annotations, sliceAnnotations(ep)) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(s)
	return ref != nil && ref.UID == ep.UID && ref.Kind == "Endpoints" && ref.APIVersion == "v1"
}

// validate checks the slices to create and update with the kind's own
// rules, before anything is written.
func (c *controller) validate(p *plan) field.ErrorList {
	var errs field.ErrorList
	for _, s := range slices.Concat(p.create, p.update) {
		obj := s.DeepCopy()
		if obj.Name == "" {
			obj.Name = generatedName(obj.GenerateName)
		}
		errs = append(errs, c.sliceRes.Kind.Strategy.Validate(obj, c.sliceRes.GroupVersion())...)
	}
	return errs
}

// generatedName is a name as the registry generates it from prefix, for
// validating a slice to be created.
func generatedName(prefix string) string {
	const maxPrefix = 63 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + strings.Repeat("x", 5)
}

// write carries out p for the Endpoints k, ep (nil: gone): creates, then
// updates, then deletes, as kube-controller-manager does. Nothing is
// created for an Endpoints being deleted, nor in a terminating
// namespace.
func (c *controller) write(ctx context.Context, k types.NamespacedName, ep *corev1.Endpoints, p *plan) error {
	if p.empty() {
		return nil
	}
	opts := registry.WriteOptions{Manager: manager}
	if ep != nil && ep.DeletionTimestamp == nil {
		for _, s := range p.create {
			out, err := c.reg.Create(ctx, c.sliceRes, s.Namespace, s, opts)
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("creating an EndpointSlice for Endpoints %s/%s: %w", ep.Namespace, ep.Name, err)
			}
			c.wrote(out.Object.(*discoveryv1.EndpointSlice))
		}
	}
	for _, s := range p.update {
		out, err := c.reg.Update(ctx, c.sliceRes, s.Namespace, s.Name, "", s, opts)
		if err != nil {
			return fmt.Errorf("updating EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
		c.wrote(out.Object.(*discoveryv1.EndpointSlice))
	}
	for _, s := range p.remove {
		uid := s.UID
		_, err := c.reg.Delete(ctx, c.sliceRes, s.Namespace, s.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			c.expect(controllers.KeyOf(s), "")
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("deleting EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	c.log.Debug("mirrored endpoints", "endpoints", k.String(), "created", len(p.create), "updated", len(p.update), "deleted", len(p.remove))
	return nil
}

// wrote records a slice as this controller wrote it: its watch event is
// its own, and the next reconcile sees it even before that event.
func (c *controller) wrote(s *discoveryv1.EndpointSlice) {
	c.expect(controllers.KeyOf(s), s.ResourceVersion)
	c.slices.Observe(s)
}
