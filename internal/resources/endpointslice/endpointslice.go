package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// The managed-by values of kube-controller-manager's two EndpointSlice
// controllers, whose IPs are already canonical, so their warnings are
// skipped. See pkg/controller/endpointslice and
// pkg/controller/endpointslicemirroring in kubernetes.
const (
	sliceController     = "endpointslice-controller.k8s.io"
	mirroringController = "endpointslicemirroring-controller.k8s.io"
)

// New returns the description of discovery.k8s.io/v1 EndpointSlices.
func New() *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "EndpointSlice", ListKind: "EndpointSliceList",
			Plural: "endpointslices", Singular: "endpointslice",
		},
		Namespaced: true,
		KeyPath:    "endpointslices",
		Versions: []resources.Version{{
			GroupVersion: discoveryv1.SchemeGroupVersion,
			New:          func() resources.Object { return &discoveryv1.EndpointSlice{} },
			NewList:      func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
			Default:      setDefaults,
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{},
		Updates:  resources.UpdatePolicy{AllowUnconditionalUpdate: true},
		Table:    resources.Table{Columns: columns(), Row: row},
		Fields:   resources.Fields{Labels: resources.MetadataFields, Value: resources.MetadataField},
	}
}

// setDefaults is SetObjectDefaults_EndpointSlice: every port gets a name
// ("") and a protocol (TCP) when it has none.
func setDefaults(obj resources.Object) {
	eps := obj.(*discoveryv1.EndpointSlice)
	for i := range eps.Ports {
		p := &eps.Ports[i]
		if p.Name == nil {
			p.Name = new(string)
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

// strategy holds the EndpointSlice write rules.
type strategy struct{}

// PrepareForCreate starts the generation at 1 and drops
// deprecatedTopology.
func (strategy) PrepareForCreate(obj resources.Object) {
	eps := obj.(*discoveryv1.EndpointSlice)
	eps.Generation = 1
	dropTopology(nil, eps)
}

// PrepareForUpdate bumps the generation when anything but metadata
// changed, or the labels did (compared before deprecatedTopology is
// dropped, as upstream does), then drops deprecatedTopology. obj arrives
// with old's generation.
func (strategy) PrepareForUpdate(obj, old resources.Object) {
	eps, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	// Compared once for both uses: the comparison walks every endpoint.
	sameEndpoints := equality.Semantic.DeepEqual(eps.Endpoints, o.Endpoints)
	if eps.AddressType != o.AddressType || !sameEndpoints ||
		!equality.Semantic.DeepEqual(eps.Ports, o.Ports) ||
		!equality.Semantic.DeepEqual(eps.Labels, o.Labels) {
		eps.Generation = o.Generation + 1
	}
	if !sameEndpoints {
		dropTopology(o, eps)
	}
}

func (strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateCreate(obj.(*discoveryv1.EndpointSlice))
}

func (strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateUpdate(obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice))
}

// Warnings are WarningsOnCreate (FQDN slices are deprecated, then IPs in
// non-standard forms) and WarningsOnUpdate (the IPs only).
func (strategy) Warnings(obj, old resources.Object) []string {
	eps := obj.(*discoveryv1.EndpointSlice)
	var out []string
	// Upstream names a "spec" the type does not have.
	if old == nil && eps.AddressType == discoveryv1.AddressTypeFQDN {
		out = append(out, "spec.addressType: FQDN endpoints are deprecated")
	}
	return append(out, ipWarnings(eps)...)
}

// ipWarnings is warnOnBadIPs: every address of every address type is
// looked at. Addresses that are no IP get none (GetWarningsForIP would
// log them as a programming error and return none).
func ipWarnings(eps *discoveryv1.EndpointSlice) []string {
	if m := eps.Labels[discoveryv1.LabelManagedBy]; m == sliceController || m == mirroringController {
		return nil
	}
	var out []string
	for i := range eps.Endpoints {
		for j, addr := range eps.Endpoints[i].Addresses {
			if netutils.ParseIPSloppy(addr) == nil {
				continue
			}
			out = append(out, utilvalidation.GetWarningsForIP(endpointsPath.Index(i).Child("addresses").Index(j), addr)...)
		}
	}
	return out
}

// dropTopology is dropTopologyOnV1 for a v1 request, the only version
// served (v1beta1, which kept the field, is gone since 1.25). On create
// (old nil) and on an update that changes the endpoints, every endpoint
// loses deprecatedTopology; one without nodeName first takes the node
// name its kubernetes.io/hostname label held, if old had that name
// there too and it is a valid node name. An update that leaves the
// endpoints as they were keeps them as they were: the caller does not
// call it then.
func dropTopology(old, eps *discoveryv1.EndpointSlice) {
	prev := topologyNodeNames(old)
	for i := range eps.Endpoints {
		ep := &eps.Endpoints[i]
		if name, ok := ep.DeprecatedTopology[corev1.LabelHostname]; ok && ep.NodeName == nil && prev[name] &&
			len(apivalidation.NameIsDNSSubdomain(name, false)) == 0 {
			ep.NodeName = &name
		}
		ep.DeprecatedTopology = nil
	}
}

// topologyNodeNames returns the non-empty kubernetes.io/hostname values of
// the endpoints' deprecatedTopology.
func topologyNodeNames(eps *discoveryv1.EndpointSlice) map[string]bool {
	if eps == nil {
		return nil
	}
	var names map[string]bool
	for _, ep := range eps.Endpoints {
		if name := ep.DeprecatedTopology[corev1.LabelHostname]; name != "" {
			if names == nil {
				names = map[string]bool{}
			}
			names[name] = true
		}
	}
	return names
}
