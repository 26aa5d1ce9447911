package endpointslice

import (
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/endpoints"
)

// Limits of pkg/apis/discovery/validation. maxPorts was 100 in older
// releases; 1.36 allows 20000.
const (
	maxTopologyLabels = 16
	maxAddresses      = 100
	maxPorts          = 20000
	maxEndpoints      = 1000
	maxZoneHints      = 8
	maxNodeHints      = 8
)

// Both lists are sorted: NotSupported details list them in this order.
var (
	addressTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
	protocols    = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
)

// strictIP mirrors StrictIPCIDRValidation, beta and on by default since
// 1.36: IPv4 addresses may not have leading zeros or be IPv4-mapped IPv6.
const strictIP = true

var (
	addressTypePath = field.NewPath("addressType")
	endpointsPath   = field.NewPath("endpoints")
	portsPath       = field.NewPath("ports")
)

// validateCreate is ValidateEndpointSliceCreate, completed by the generic
// create checks.
func validateCreate(eps *discoveryv1.EndpointSlice) field.ErrorList {
	return resources.ValidateCreate(eps, true, validateSlice(eps, nil))
}

// validateUpdate is ValidateEndpointSliceUpdate after the generic update
// checks. Unlike Endpoints', it runs only the create rules of metadata, so
// a bad label is reported three times, not four.
func validateUpdate(eps, old *discoveryv1.EndpointSlice) field.ErrorList {
	meta := resources.CheckMetaUpdate(eps, old)
	errs := validateSlice(eps, old)
	errs = append(errs, apivalidation.ValidateImmutableField(eps.AddressType, old.AddressType, addressTypePath).WithOrigin("immutable")...)
	return resources.ValidateUpdate(eps, true, meta, errs)
}

// validateSlice is ValidateEndpointSlice; old is nil on create. Its order
// is metadata, addressType, ports, endpoints.
func validateSlice(eps, old *discoveryv1.EndpointSlice) field.ErrorList {
	errs := resources.ValidateObjectMeta(eps, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateAddressType(eps.AddressType)...)
	errs = append(errs, validatePorts(eps.Ports)...)
	epErrs := validateEndpoints(eps.Endpoints, eps.AddressType)
	// An update that leaves the endpoints unchanged is not held to rules
	// older releases did not enforce.
	if len(epErrs) != 0 && old != nil && equality.Semantic.DeepEqual(old.Endpoints, eps.Endpoints) {
		epErrs = nil
	}
	return append(errs, epErrs...)
}

// validateAddressType: the deprecated "IP" type is refused too, on create
// and update alike. The bad value keeps its named type, which renders as
// JSON in the message, as upstream's does.
func validateAddressType(t discoveryv1.AddressType) field.ErrorList {
	switch {
	case t == "":
		return field.ErrorList{field.Required(addressTypePath, "")}
	case !slices.Contains(addressTypes, t):
		return field.ErrorList{field.NotSupported(addressTypePath, t, addressTypes)}
	}
	return nil
}

// validateEndpoints checks each endpoint; more than maxEndpoints is one
// error and nothing else is checked. Addresses of an unknown address
// type are not checked; neither are conditions, zone or targetRef.
func validateEndpoints(eps []discoveryv1.Endpoint, addrType discoveryv1.AddressType) field.ErrorList {
	if len(eps) > maxEndpoints {
		return field.ErrorList{field.TooMany(endpointsPath, len(eps), maxEndpoints)}
	}
	var errs field.ErrorList
	for i := range eps {
		ep := &eps[i]
		idxPath := endpointsPath.Index(i)
		addrPath := idxPath.Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxAddresses {
			errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxAddresses).WithOrigin("maxItems"))
		}
		for j, addr := range ep.Addresses {
			errs = append(errs, validateAddress(addr, addrType, addrPath, addrPath.Index(j))...)
		}
		if ep.NodeName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				errs = append(errs, field.Invalid(idxPath.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		// Only reachable when an update keeps the endpoints (v1 requests
		// drop deprecatedTopology otherwise), whose errors are then
		// discarded; kept for the record.
		topoPath := idxPath.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			errs = append(errs, field.TooMany(topoPath, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, topoPath)...)
		if _, ok := ep.DeprecatedTopology[corev1.LabelTopologyZone]; ok {
			errs = append(errs, field.InternalError(topoPath.Key(corev1.LabelTopologyZone), errors.New("reserved key was not removed in conversion")))
		}
		if ep.Hostname != nil {
			errs = append(errs, dns1123Label(*ep.Hostname, idxPath.Child("hostname"))...)
		}
		if ep.Hints != nil {
			errs = append(errs, validateHints(ep.Hints, idxPath.Child("hints"))...)
		}
	}
	return errs
}

// validateAddress checks one address by the slice's address type. An IP
// that parses but is of the other family is reported on the addresses
// list itself (addrPath), not on the address, as upstream does; the
// destination rules apply only to IPs that parse.
func validateAddress(addr string, addrType discoveryv1.AddressType, addrPath, fldPath *field.Path) field.ErrorList {
	switch addrType {
	case discoveryv1.AddressTypeIPv4:
		if errs := utilvalidation.IsValidIPForLegacyField(fldPath, addr, strictIP, nil); len(errs) > 0 {
			return errs
		}
		var errs field.ErrorList
		if !netutils.IsIPv4String(addr) {
			errs = append(errs, field.Invalid(addrPath, addr, "must be an IPv4 address"))
		}
		return append(errs, endpoints.ValidateEndpointIP(addr, fldPath)...)
	case discoveryv1.AddressTypeIPv6:
		if errs := utilvalidation.IsValidIP(fldPath, addr); len(errs) > 0 {
			return errs
		}
		var errs field.ErrorList
		if !netutils.IsIPv6String(addr) {
			errs = append(errs, field.Invalid(addrPath, addr, "must be an IPv6 address"))
		}
		return append(errs, endpoints.ValidateEndpointIP(addr, fldPath)...)
	case discoveryv1.AddressTypeFQDN:
		return utilvalidation.IsFullyQualifiedDomainName(fldPath, addr)
	}
	return nil
}

// validatePorts checks each port; more than maxPorts is one error and
// nothing else is checked. Port numbers are not checked at all (0 and
// none are allowed); names must be DNS-1123 labels and unique, the empty
// name included.
func validatePorts(ports []discoveryv1.EndpointPort) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(portsPath, len(ports), maxPorts)}
	}
	var errs field.ErrorList
	names := make([]string, 0, len(ports))
	for i := range ports {
		p := &ports[i]
		idxPath := portsPath.Index(i)
		// Defaulting sets a name; upstream dereferences it unchecked.
		var name string
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			errs = append(errs, dns1123Label(name, idxPath.Child("name"))...)
		}
		if slices.Contains(names, name) {
			// Upstream reports the *string, which renders as JSON.
			errs = append(errs, field.Duplicate(idxPath.Child("name"), &name))
		} else {
			names = append(names, name)
		}
		switch {
		case p.Protocol == nil:
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		case !slices.Contains(protocols, *p.Protocol):
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *p.Protocol, protocols))
		}
		if p.AppProtocol != nil {
			for _, msg := range utilvalidation.IsQualifiedName(*p.AppProtocol) {
				errs = append(errs, field.Invalid(idxPath.Child("appProtocol"), *p.AppProtocol, msg).WithOrigin("format=qualified-name"))
			}
		}
	}
	return errs
}

// validateHints: more than maxZoneHints zones is one error and the nodes
// are then not checked; more than maxNodeHints nodes likewise. Zone names
// are label values, node names node names, each unique.
func validateHints(h *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	zonesPath := fldPath.Child("forZones")
	if len(h.ForZones) > maxZoneHints {
		return field.ErrorList{field.TooMany(zonesPath, len(h.ForZones), maxZoneHints)}
	}
	var errs field.ErrorList
	zones := make([]string, 0, len(h.ForZones))
	for i, z := range h.ForZones {
		p := zonesPath.Index(i).Child("name")
		if slices.Contains(zones, z.Name) {
			errs = append(errs, field.Duplicate(p, z.Name))
		} else {
			zones = append(zones, z.Name)
		}
		for _, msg := range utilvalidation.IsValidLabelValue(z.Name) {
			errs = append(errs, field.Invalid(p, z.Name, msg))
		}
	}
	nodesPath := fldPath.Child("forNodes")
	if len(h.ForNodes) > maxNodeHints {
		return append(errs, field.TooMany(nodesPath, len(h.ForNodes), maxNodeHints))
	}
	nodes := make([]string, 0, len(h.ForNodes))
	for i, n := range h.ForNodes {
		p := nodesPath.Index(i).Child("name")
		if slices.Contains(nodes, n.Name) {
			errs = append(errs, field.Duplicate(p, n.Name))
		} else {
			nodes = append(nodes, n.Name)
		}
		for _, msg := range apivalidation.NameIsDNSSubdomain(n.Name, false) {
			errs = append(errs, field.Invalid(p, n.Name, msg))
		}
	}
	return errs
}

// dns1123Label is core's ValidateDNS1123Label.
func dns1123Label(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg).WithOrigin("format=k8s-short-name"))
	}
	return errs
}
