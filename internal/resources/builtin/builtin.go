// Package builtin is the list of the kinds leasehold serves. Everything
// that depends on what is served (the codec's scheme, discovery, OpenAPI,
// routing, storage and the watch caches) is derived from this list:
// adding a kind is writing its description and adding it here.
package builtin

import (
	"time"

	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/resources/endpoints"
	"github.com/leasehold/leasehold/internal/resources/endpointslice"
	"github.com/leasehold/leasehold/internal/resources/event"
	"github.com/leasehold/leasehold/internal/resources/lease"
	"github.com/leasehold/leasehold/internal/resources/leasecandidate"
	"github.com/leasehold/leasehold/internal/resources/namespace"
	"github.com/leasehold/leasehold/internal/resources/rbac"
)

// Options are the server settings that change what is served.
type Options struct {
	// CoordinatedLeaderElection serves coordinated leader election: Lease
	// spec.strategy and spec.preferredHolder are kept, and LeaseCandidates
	// are served; without it the fields are dropped and LeaseCandidates
	// not served, as kube-apiserver does while its feature gate is off.
	CoordinatedLeaderElection bool
	// EventTTL is how long an event lives after its last write
	// (kube-apiserver's --event-ttl); 0 means forever, as there.
	EventTTL time.Duration
}

// Kinds returns a fresh list of the served kinds.
func Kinds(opts Options) []*resources.Kind {
	kinds := []*resources.Kind{
		namespace.New(),
		lease.New(lease.Options{CoordinatedLeaderElection: opts.CoordinatedLeaderElection}),
		endpoints.New(),
		endpointslice.New(),
		event.New(event.Options{TTL: opts.EventTTL}),
		rbac.NewClusterRole(),
		rbac.NewClusterRoleBinding(),
		rbac.NewRole(),
		rbac.NewRoleBinding(),
	}
	if opts.CoordinatedLeaderElection {
		kinds = append(kinds, leasecandidate.New())
	}
	return kinds
}
