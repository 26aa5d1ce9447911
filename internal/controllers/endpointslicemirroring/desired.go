package endpointslicemirroring

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	esutil "k8s.io/endpointslice/util"
	netutils "k8s.io/utils/net"
)

// sliceKey identifies the slices of one address type and port set, as
// the controller's addrTypePortMapKey does.
type sliceKey struct {
	addressType discoveryv1.AddressType
	ports       esutil.PortMapKey
}

// keyOfSlice is the key of an existing slice. NewPortMapKey sorts the
// ports it hashes, so it gets a copy: the slice is the registry's.
func keyOfSlice(s *discoveryv1.EndpointSlice) sliceKey {
	return sliceKey{addressType: s.AddressType, ports: esutil.NewPortMapKey(slices.Clone(s.Ports))}
}

// group is what one slice of an Endpoints should hold: its ports and
// endpoints, in a stable order, and the endpoints as a set for comparing.
type group struct {
	ports     []discoveryv1.EndpointPort
	endpoints []*discoveryv1.Endpoint
	set       map[endpointID]*discoveryv1.Endpoint
	// size is how many endpoints the group may get (its subset's
	// addresses, either family): the set and list are made that large at
	// the first, not grown a doubling at a time through a 1,000-address
	// update.
	size int
}

// endpointID is an endpoint's identity as the upstream controller's
// EndpointSet has it (its addresses as a set, hostname and target), as
// a map key: EndpointSet hashes it by printing it, which cost ~8 ms an
// update of a 1,000-address Endpoints.
type endpointID struct {
	addresses                 string // sorted, joined by newlines: no address holds one
	hostname, namespace, name string
}

func idOf(e *discoveryv1.Endpoint) endpointID {
	var id endpointID
	if len(e.Addresses) == 1 {
		id.addresses = e.Addresses[0]
	} else {
		id.addresses = strings.Join(slices.Sorted(slices.Values(e.Addresses)), "\n")
	}
	if e.Hostname != nil {
		id.hostname = *e.Hostname
	}
	if e.TargetRef != nil {
		id.namespace, id.name = e.TargetRef.Namespace, e.TargetRef.Name
	}
	return id
}

// desired is what an Endpoints mirrors to.
type desired struct {
	groups map[sliceKey]*group
	// order lists the keys as first met, for writes in a stable order.
	order []sliceKey
	// invalid counts the addresses that are no IP; skipped those left
	// out, invalid or past maxEndpointsPerSubset.
	invalid, skipped int
}

// desiredFor computes the slices that mirror ep: its subsets repacked
// into their canonical form (one per distinct port set), then each
// subset's addresses, ready ones first, up to max, grouped by address
// family. Every key a subset names is in groups, with no endpoints when
// it has none of that family: its slices are to go.
func desiredFor(ep *corev1.Endpoints, max int) *desired {
	d := &desired{groups: map[sliceKey]*group{}}
	for _, ss := range repack(ep.Subsets) {
		ports := slicePorts(ss.Ports)
		pk := esutil.NewPortMapKey(ports) // sorts ports
		size := min(len(ss.Addresses)+len(ss.NotReadyAddresses), max)
		keys := map[discoveryv1.AddressType]sliceKey{}
		for _, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			k := sliceKey{addressType: at, ports: pk}
			keys[at] = k
			if d.groups[k] == nil {
				d.groups[k] = &group{ports: ports, size: size}
				d.order = append(d.order, k)
			}
		}
		added := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for i := range addrs {
				if added >= max {
					return
				}
				e, at, ok := endpointOf(&addrs[i], ready)
				if !ok {
					d.invalid++
					continue
				}
				d.groups[keys[at]].add(e)
				added++
			}
		}
		add(ss.Addresses, true)
		add(ss.NotReadyAddresses, false)
		d.skipped += len(ss.Addresses) + len(ss.NotReadyAddresses) - added
	}
	return d
}

// add adds e, replacing an endpoint of the same identity (addresses,
// hostname, target) in place.
func (g *group) add(e *discoveryv1.Endpoint) {
	if g.set == nil {
		g.set = make(map[endpointID]*discoveryv1.Endpoint, g.size)
		g.endpoints = make([]*discoveryv1.Endpoint, 0, g.size)
	}
	id := idOf(e)
	if cur := g.set[id]; cur != nil {
		*cur = *e
		return
	}
	g.set[id] = e
	g.endpoints = append(g.endpoints, e)
}

// endpointOf converts an Endpoints address; ok is false when it is no
// IP. The IP is written in its canonical form.
func endpointOf(addr *corev1.EndpointAddress, ready bool) (e *discoveryv1.Endpoint, at discoveryv1.AddressType, ok bool) {
	ip := netutils.ParseIPSloppy(addr.IP)
	if ip == nil {
		return nil, "", false
	}
	at = discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		at = discoveryv1.AddressTypeIPv6
	}
	e = &discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		NodeName:   addr.NodeName,
	}
	if addr.TargetRef != nil {
		ref := *addr.TargetRef
		e.TargetRef = &ref
	}
	if addr.Hostname != "" {
		h := addr.Hostname
		e.Hostname = &h
	}
	return e, at, true
}

// slicePorts converts an Endpoints subset's ports; never nil, so that
// no ports and an empty list are one port set.
func slicePorts(in []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(in))
	for _, p := range in {
		name, port, proto := p.Name, p.Port, p.Protocol
		var app *string
		if p.AppProtocol != nil {
			a := *p.AppProtocol
			app = &a
		}
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto, AppProtocol: app})
	}
	return out
}

// newSlice is the slice that mirrors ep's group g of address type at:
// ep's labels, its annotations but two, and an ownerReference naming ep
// as controller. name is the existing slice's; "" asks the registry for
// a generated one.
func newSlice(ep *corev1.Endpoints, at discoveryv1.AddressType, g *group, name string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ep.Namespace,
			Labels:          sliceLabels(ep),
			Annotations:     sliceAnnotations(ep),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: at,
		Ports:       slicePorts(nil),
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(g.endpoints)),
	}
	// Each slice gets its own ports: a write may default them in place.
	for _, p := range g.ports {
		s.Ports = append(s.Ports, *p.DeepCopy())
	}
	for _, e := range g.endpoints {
		s.Endpoints = append(s.Endpoints, *e.DeepCopy())
	}
	if name == "" {
		s.GenerateName = slicePrefix(ep.Name)
	}
	return s
}

// sliceLabels are ep's labels, with the two that mark a mirrored slice.
func sliceLabels(ep *corev1.Endpoints) map[string]string {
	l := make(map[string]string, len(ep.Labels)+2)
	maps.Copy(l, ep.Labels)
	l[discoveryv1.LabelServiceName] = ep.Name
	l[discoveryv1.LabelManagedBy] = ControllerName
	return l
}

// sliceAnnotations are ep's annotations but the trigger time and kubectl's
// last applied configuration, which describe the Endpoints alone.
func sliceAnnotations(ep *corev1.Endpoints) map[string]string {
	a := make(map[string]string, len(ep.Annotations))
	for k, v := range ep.Annotations {
		if k != corev1.EndpointsLastChangeTriggerTime && k != corev1.LastAppliedConfigAnnotation {
			a[k] = v
		}
	}
	return a
}

// slicePrefix is the generateName of ep's slices: "NAME-" when that is a
// valid prefix, else NAME.
func slicePrefix(name string) string {
	if p := name + "-"; len(apivalidation.NameIsDNSSubdomain(p, true)) == 0 {
		return p
	}
	return name
}

// repack returns subsets in the canonical form kube-controller-manager
// mirrors from (RepackSubsets of pkg/api/v1/endpoints): one subset per
// distinct set of addresses, holding every port those addresses serve;
// an address (IP and target UID) at most once per port, not ready when
// any subset lists it not ready; addresses sorted by IP, then UID. A
// subset without ports keeps its addresses, with no ports. The input is
// not modified.
func repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	type addrKey struct {
		ip  string
		uid types.UID
	}
	// portKey compares ports by value: AppProtocol is a pointer.
	type portKey struct {
		name, app string
		hasApp    bool
		port      int32
		protocol  corev1.Protocol
	}
	// Maps sized for the addresses at once: grown from empty, a
	// 1,000-address update rehashed each through some seven doublings.
	total := 0
	for i := range subsets {
		total += len(subsets[i].Addresses) + len(subsets[i].NotReadyAddresses)
	}
	var (
		addrs       = make(map[addrKey]*corev1.EndpointAddress, total) // first seen, by key
		portOf      = map[portKey]corev1.EndpointPort{}
		portOrder   []portKey
		readyByPort = map[portKey]map[addrKey]bool{}
	)
	// noPorts stands for a subset without ports.
	noPorts := portKey{port: -1}
	note := func(m map[addrKey]bool, addr *corev1.EndpointAddress, ready bool) {
		k := addrKey{ip: addr.IP}
		if addr.TargetRef != nil {
			k.uid = addr.TargetRef.UID
		}
		if addrs[k] == nil {
			addrs[k] = addr
		}
		// Not ready wins over ready.
		if was, seen := m[k]; !seen || was {
			m[k] = ready
		}
	}
	// noteAll notes a subset's addresses under pk; a port is known from
	// its first address on.
	noteAll := func(pk portKey, ss *corev1.EndpointSubset) {
		n := len(ss.Addresses) + len(ss.NotReadyAddresses)
		if n == 0 {
			return
		}
		m := readyByPort[pk]
		if m == nil {
			m = make(map[addrKey]bool, n)
			readyByPort[pk] = m
			portOrder = append(portOrder, pk)
		}
		for j := range ss.Addresses {
			note(m, &ss.Addresses[j], true)
		}
		for j := range ss.NotReadyAddresses {
			note(m, &ss.NotReadyAddresses[j], false)
		}
	}
	for i := range subsets {
		ss := &subsets[i]
		if len(ss.Ports) == 0 {
			noteAll(noPorts, ss)
		}
		for _, p := range ss.Ports {
			pk := portKey{name: p.Name, port: p.Port, protocol: p.Protocol}
			if p.AppProtocol != nil {
				pk.app, pk.hasApp = *p.AppProtocol, true
			}
			portOf[pk] = p
			noteAll(pk, ss)
		}
	}
	less := func(a, b addrKey) int {
		if c := bytes.Compare([]byte(a.ip), []byte(b.ip)); c != 0 {
			return c
		}
		return strings.Compare(string(a.uid), string(b.uid))
	}
	// Ports whose addresses (with readiness) are the same share a subset.
	type entry struct {
		keys  []addrKey
		ready map[addrKey]bool
		ports []corev1.EndpointPort
	}
	var out []*entry
	bySet := map[string]*entry{}
	for _, pk := range portOrder {
		m := readyByPort[pk]
		keys := slices.SortedFunc(maps.Keys(m), less)
		var id strings.Builder
		for _, k := range keys {
			id.WriteString(k.ip)
			id.WriteByte(0)
			id.WriteString(string(k.uid))
			if m[k] {
				id.WriteString("\x00r\x00")
			} else {
				id.WriteString("\x00n\x00")
			}
		}
		e := bySet[id.String()]
		if e == nil {
			e = &entry{keys: keys, ready: m}
			bySet[id.String()] = e
			out = append(out, e)
		}
		if pk != noPorts {
			e.ports = append(e.ports, portOf[pk])
		}
	}
	result := make([]corev1.EndpointSubset, 0, len(out))
	for _, e := range out {
		var ss corev1.EndpointSubset
		for _, k := range e.keys {
			if e.ready[k] {
				ss.Addresses = append(ss.Addresses, *addrs[k])
			} else {
				ss.NotReadyAddresses = append(ss.NotReadyAddresses, *addrs[k])
			}
		}
		ss.Ports = e.ports
		result = append(result, ss)
	}
	return result
}
