package endpoints

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/leasehold/leasehold/internal/openapi/definitions"
	"github.com/leasehold/leasehold/internal/resources"
)

// Label and value by which the Endpoints controller marks its objects; its
// IPs are already canonical, so their warnings are skipped. See
// pkg/controller/endpoint/endpoints_controller.go in kubernetes.
const (
	labelManagedBy = "endpoints.kubernetes.io/managed-by"
	controllerName = "endpoint-controller"
)

// New returns the description of core v1 Endpoints.
func New() *resources.Kind {
	return &resources.Kind{
		Names: resources.Names{
			Kind: "Endpoints", ListKind: "EndpointsList",
			Plural: "endpoints", Singular: "endpoints",
			ShortNames: []string{"ep"},
		},
		Namespaced: true,
		KeyPath:    "services/endpoints",
		Versions: []resources.Version{{
			GroupVersion: corev1.SchemeGroupVersion,
			New:          func() resources.Object { return &corev1.Endpoints{} },
			NewList:      func() runtime.Object { return &corev1.EndpointsList{} },
			Default:      setDefaults,
			OpenAPI:      definitions.GetOpenAPIDefinitions,
		}},
		Strategy: strategy{},
		Updates:  resources.UpdatePolicy{AllowCreateOnUpdate: true, AllowUnconditionalUpdate: true},
		Table: resources.Table{
			Columns: []metav1.TableColumnDefinition{
				resources.NameColumn(),
				{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
				resources.AgeColumn(),
			},
			Row: row,
		},
		Fields: resources.Fields{Labels: resources.MetadataFields, Value: resources.MetadataField},
	}
}

// strategy holds the Endpoints write rules: validation and IP warnings;
// nothing is prepared, subsets are stored as sent.
type strategy struct{ resources.Unprepared }

func (strategy) Warnings(obj, old resources.Object) []string { return warnings(obj, old) }

func (strategy) Validate(obj resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validate(obj)
}

func (strategy) ValidateUpdate(obj, old resources.Object, _ schema.GroupVersion) field.ErrorList {
	return validateUpdate(obj, old)
}

// setDefaults is SetDefaults_Endpoints: the only v1 default.
func setDefaults(obj resources.Object) {
	ep := obj.(*corev1.Endpoints)
	for i := range ep.Subsets {
		ports := ep.Subsets[i].Ports
		for j := range ports {
			if ports[j].Protocol == "" {
				ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func validate(obj resources.Object) field.ErrorList {
	ep := obj.(*corev1.Endpoints)
	return resources.ValidateCreate(ep, true, validateEndpoints(ep, nil))
}

// validateUpdate is ValidateEndpointsUpdate, which runs the update metadata
// rules and then every create rule again.
func validateUpdate(obj, old resources.Object) field.ErrorList {
	ep, o := obj.(*corev1.Endpoints), old.(*corev1.Endpoints)
	meta := resources.CheckMetaUpdate(ep, o)
	errs := append(meta.CoreErrors(ep), validateEndpoints(ep, o)...)
	return resources.ValidateUpdate(ep, true, meta, errs)
}

// validateEndpoints is ValidateEndpoints. old is nil on create.
func validateEndpoints(ep, old *corev1.Endpoints) field.ErrorList {
	errs := resources.ValidateObjectMeta(ep, true, apivalidation.NameIsDNSSubdomain)
	subsetErrs := validateSubsets(ep.Subsets, field.NewPath("subsets"))
	// An update that leaves subsets unchanged is not held to rules older
	// releases did not enforce.
	if len(subsetErrs) != 0 && old != nil && equality.Semantic.DeepEqual(old.Subsets, ep.Subsets) {
		subsetErrs = nil
	}
	return append(errs, subsetErrs...)
}

func validateSubsets(subsets []corev1.EndpointSubset, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range subsets {
		ss := &subsets[i]
		p := fldPath.Index(i)
		// Ports may be empty (headless services); addresses may not.
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validatePort(&ss.Ports[j], len(ss.Ports) > 1, p.Child("ports").Index(j))...)
		}
	}
	return errs
}

// validateAddress is validateEndpointAddress. The IP is checked twice, by
// the legacy IP-syntax check first and by ValidateEndpointIP last, so an
// unparseable IP yields two errors with different details. targetRef is not
// validated.
func validateAddress(addr *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	ipPath := fldPath.Child("ip")
	// strictValidation follows the alpha gate StrictIPCIDRValidation, off.
	errs := utilvalidation.IsValidIPForLegacyField(ipPath, addr.IP, false, nil)
	if addr.Hostname != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(addr.Hostname) {
			errs = append(errs, field.Invalid(fldPath.Child("hostname"), addr.Hostname, msg).WithOrigin("format=k8s-short-name"))
		}
	}
	if addr.NodeName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*addr.NodeName, false) {
			errs = append(errs, field.Invalid(fldPath.Child("nodeName"), *addr.NodeName, msg).WithOrigin("format=dns-label"))
		}
	}
	return append(errs, ValidateEndpointIP(addr.IP, ipPath)...)
}

// ValidateEndpointIP is kube-apiserver's ValidateEndpointIP, which
// Endpoints and EndpointSlices share: it rejects the address kinds that
// make no sense as a destination. Each applicable rule is its own error.
// Other multicast and broadcast addresses pass, as upstream.
func ValidateEndpointIP(value string, fldPath *field.Path) field.ErrorList {
	ip := netutils.ParseIPSloppy(value)
	if ip == nil {
		return field.ErrorList{field.Invalid(fldPath, value, "must be a valid IP address").WithOrigin("format=ip-sloppy")}
	}
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(fldPath, value, "may not be unspecified ("+value+")"))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	// The message says ff02::/10; Go's rule (and so the check) is ff02::/16.
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fldPath, value, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs.WithOrigin("format=endpoint-ip")
}

// supportedProtocols is sorted: the NotSupported detail lists them in this
// order.
var supportedProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

// validatePort is validateEndpointPort. Names are DNS-1123 labels (not IANA
// service names) and only required when the subset has several ports;
// duplicate names or numbers are allowed.
func validatePort(port *corev1.EndpointPort, requireName bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && port.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if port.Name != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(port.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), port.Name, msg).WithOrigin("format=k8s-short-name"))
		}
	}
	for _, msg := range utilvalidation.IsValidPortNum(int(port.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), port.Port, msg).WithOrigin("portNum"))
	}
	switch {
	case port.Protocol == "":
		errs = append(errs, field.Required(fldPath.Child("protocol"), ""))
	case !supportedProtocol(port.Protocol):
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), port.Protocol, supportedProtocols))
	}
	if port.AppProtocol != nil {
		for _, msg := range utilvalidation.IsQualifiedName(*port.AppProtocol) {
			errs = append(errs, field.Invalid(fldPath.Child("appProtocol"), *port.AppProtocol, msg).WithOrigin("format=qualified-name"))
		}
	}
	return errs
}

func supportedProtocol(p corev1.Protocol) bool {
	for _, s := range supportedProtocols {
		if p == s {
			return true
		}
	}
	return false
}

// warnings are the per-IP notes on non-canonical forms (leading zeros,
// IPv4-mapped IPv6, non-RFC-5952 IPv6) that kube-apiserver sends on create
// and update, except for objects written by the Endpoints controller.
func warnings(obj, _ resources.Object) []string {
	ep := obj.(*corev1.Endpoints)
	if ep.Labels[labelManagedBy] == controllerName {
		return nil
	}
	var out []string
	subsets := field.NewPath("subsets")
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		for j := range ss.Addresses {
			out = append(out, ipWarnings(subsets.Index(i).Child("addresses").Index(j).Child("ip"), ss.Addresses[j].IP)...)
		}
		for j := range ss.NotReadyAddresses {
			out = append(out, ipWarnings(subsets.Index(i).Child("notReadyAddresses").Index(j).Child("ip"), ss.NotReadyAddresses[j].IP)...)
		}
	}
	return out
}

// ipWarnings skips unparseable IPs, which GetWarningsForIP would log as a
// programming error; it returns no warning for them either. They reach here
// only on an update that keeps old, invalid subsets.
func ipWarnings(fldPath *field.Path, ip string) []string {
	if netutils.ParseIPSloppy(ip) == nil {
		return nil
	}
	return utilvalidation.GetWarningsForIP(fldPath, ip)
}

func row(obj resources.Object, now time.Time) []any {
	ep := obj.(*corev1.Endpoints)
	return []any{ep.Name, formatEndpoints(ep), resources.Age(ep.CreationTimestamp, now)}
}
