package httpserver

import (
	"encoding/json"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// LeaseHistoryPath serves Config.LeaseHistory: the recent holders of the
// leases of ?namespace= (of all without it), for the live view.
const LeaseHistoryPath = "/leasehold/v1/leasehistory"

// leaseHistoryRequest authorizes a request for lease histories as a list
// of the leases it covers: a history shows only what following that list
// would have shown (holders and their times), so whoever may list the
// leases may see it, with no rule of its own, RBAC's namespace scoping
// holds, and a refusal reads as the list's would.
func leaseHistoryRequest(call *request) {
	a := &call.attrs
	a.ResourceRequest = true
	a.APIGroup, a.APIVersion, a.Resource = coordinationv1.GroupName, "v1", "leases"
	a.Namespace = call.query.Get("namespace")
	if call.method == http.MethodGet || call.method == http.MethodHead {
		a.Verb = "list"
	}
	call.leaseHistory, call.routable = true, true
}

// serveLeaseHistory answers an authorized request for lease histories.
func (s *Server) serveLeaseHistory(w http.ResponseWriter, call *request) error {
	if s.cfg.LeaseHistory == nil {
		return notFoundPath()
	}
	if call.attrs.Verb != "list" {
		return methodNotAllowed()
	}
	body, err := json.Marshal(s.cfg.LeaseHistory(call.attrs.Namespace))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(body)
	return err
}
