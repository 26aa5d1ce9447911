package endpoints

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// maxShown is how many endpoints the Endpoints cell lists before
// summarising the rest.
const maxShown = 3

// formatEndpoints renders the Endpoints cell as kube-apiserver's
// formatEndpoints does: "<none>" without subsets; otherwise the ready
// addresses, as "ip:port" per port ("[ip]:port" for IPv6) or bare IPs for a
// subset without ports, at most three, then " + N more...". Not-ready
// addresses are never shown, so a notReady-only object renders as "".
// See pkg/printers/internalversion/printers.go in kubernetes.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	more := false
	count := 0
	add := func(s string) {
		if len(list) == maxShown {
			more = true
			return
		}
		list = append(list, s)
	}
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for j := range ss.Addresses {
				add(ss.Addresses[j].IP)
			}
			continue
		}
		for _, port := range ss.Ports {
			count += len(ss.Addresses)
			for j := range ss.Addresses {
				add(net.JoinHostPort(ss.Addresses[j].IP, strconv.Itoa(int(port.Port))))
			}
		}
	}
	s := strings.Join(list, ",")
	if more {
		return s + " + " + strconv.Itoa(count-maxShown) + " more..."
	}
	return s
}
