package endpointslice

import (
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/resources"
)

// columns are kube-apiserver's EndpointSlice columns
// (pkg/printers/internalversion/printers.go), all of priority 0: -o wide
// shows no more.
func columns() []metav1.TableColumnDefinition {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		resources.NameColumn(),
		{Name: "AddressType", Type: "string", Description: doc["addressType"]},
		{Name: "Ports", Type: "string", Description: doc["ports"]},
		{Name: "Endpoints", Type: "string", Description: doc["endpoints"]},
		resources.AgeColumn(),
	}
}

// row is printEndpointSlice.
func row(obj resources.Object, now time.Time) []any {
	eps := obj.(*discoveryv1.EndpointSlice)
	return []any{
		eps.Name,
		string(eps.AddressType),
		formatPorts(eps.Ports),
		formatEndpoints(eps.Endpoints),
		resources.Age(eps.CreationTimestamp, now),
	}
}

// maxShown is how many ports or addresses a cell lists before summarising
// the rest.
const maxShown = 3

// formatPorts is formatDiscoveryPorts: each port's number, or its name
// when it has none (defaulting gives every port a name, so an unnamed
// port without a number shows as ""), or "*" when it has neither.
func formatPorts(ports []discoveryv1.EndpointPort) string {
	var list []string
	for _, p := range ports[:min(len(ports), maxShown)] {
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return withMore(list, len(ports))
}

// formatEndpoints is formatDiscoveryEndpoints: the addresses of every
// endpoint in order, ready or not.
func formatEndpoints(eps []discoveryv1.Endpoint) string {
	var list []string
	count := 0
	for i := range eps {
		for _, addr := range eps[i].Addresses {
			if len(list) < maxShown {
				list = append(list, addr)
			}
			count++
		}
	}
	return withMore(list, count)
}

// withMore is listWithMoreString: the shown items joined by ",", then
// " + N more..." when count exceeds them; "<unset>" when that leaves
// nothing, even when the only items shown are empty strings.
func withMore(list []string, count int) string {
	s := strings.Join(list, ",")
	if count > maxShown {
		return s + " + " + strconv.Itoa(count-maxShown) + " more..."
	}
	if s == "" {
		return "<unset>"
	}
	return s
}
