package garbagecollector

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/resources"
)

// node is what the collector keeps of an object that has owners or a
// garbage collection finalizer. Its strings and owners are the
// registry's object's, shared: a node costs its own fields only.
type node struct {
	res             resources.Resource
	namespace, name string
	uid             types.UID
	// owners is the object's metadata.ownerReferences: never modified.
	owners []metav1.OwnerReference
	// deleting: metadata.deletionTimestamp is set; orphan and
	// foreground: the finalizers of an orphaning or a foreground
	// deletion are among metadata.finalizers.
	deleting, orphan, foreground bool
}

// waitsForDependents reports whether n is in a foreground deletion.
func (n *node) waitsForDependents() bool { return n.deleting && n.foreground }

// blocks reports whether n's reference to owner has blockOwnerDeletion.
func (n *node) blocks(owner types.UID) bool {
	for _, r := range n.owners {
		if r.UID == owner && isTrue(r.BlockOwnerDeletion) {
			return true
		}
	}
	return false
}

// graph holds the nodes and, for each owner's UID, its dependents. An
// object with neither owners nor finalizers of the collector has no
// node: the renewal of a Lease that owns nothing costs one map lookup.
type graph struct {
	mu         sync.Mutex // guards the maps
	nodes      map[types.UID]*node
	dependents map[types.UID]*uidSet
}

// uidSet is a set of UIDs: a slice while small (most owners have a few
// dependents, and a map per owner would cost more than its node), a map
// once large, so that removing from an owner of thousands stays cheap.
type uidSet struct {
	few  []types.UID
	many map[types.UID]struct{}
}

// setMax is the size past which a uidSet is a map.
const setMax = 16

func (s *uidSet) add(u types.UID) {
	if s.many != nil {
		s.many[u] = struct{}{}
		return
	}
	if slices.Contains(s.few, u) {
		return
	}
	if len(s.few) < setMax {
		s.few = append(s.few, u)
		return
	}
	s.many = make(map[types.UID]struct{}, 2*setMax)
	for _, f := range s.few {
		s.many[f] = struct{}{}
	}
	s.many[u] = struct{}{}
	s.few = nil
}

func (s *uidSet) remove(u types.UID) {
	if s.many != nil {
		delete(s.many, u)
		return
	}
	if i := slices.Index(s.few, u); i >= 0 {
		s.few[i] = s.few[len(s.few)-1]
		s.few = s.few[:len(s.few)-1]
	}
}

func (s *uidSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.few) + len(s.many)
}

// each calls f with every UID.
func (s *uidSet) each(f func(types.UID)) {
	if s == nil {
		return
	}
	for _, u := range s.few {
		f(u)
	}
	for u := range s.many {
		f(u)
	}
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]*uidSet{}}
}

// reset empties g.
func (g *graph) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nodes, g.dependents = map[types.UID]*node{}, map[types.UID]*uidSet{}
}

// nodeFor returns the node obj needs, nil when it needs none.
func nodeFor(res resources.Resource, obj resources.Object) *node {
	fs := obj.GetFinalizers()
	if len(fs) == 0 && len(obj.GetOwnerReferences()) == 0 {
		return nil // most objects, and every renewal of a plain Lease
	}
	n := &node{
		owners:     obj.GetOwnerReferences(),
		orphan:     slices.Contains(fs, metav1.FinalizerOrphanDependents),
		foreground: slices.Contains(fs, metav1.FinalizerDeleteDependents),
	}
	if len(n.owners) == 0 && !n.orphan && !n.foreground {
		return nil
	}
	n.res, n.namespace, n.name, n.uid = res, obj.GetNamespace(), obj.GetName(), obj.GetUID()
	n.deleting = obj.GetDeletionTimestamp() != nil
	return n
}

// observe applies an object's new state (deleted: its last one) and
// returns the UIDs of the nodes that must be looked at because of it.
func (g *graph) observe(res resources.Resource, obj resources.Object, deleted bool) []types.UID {
	uid := obj.GetUID()
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[uid]
	var n *node
	if !deleted {
		n = nodeFor(res, obj)
	}
	if old == nil && n == nil {
		if !deleted {
			return nil
		}
		return g.dependentsOf(uid, nil)
	}
	var attend []types.UID
	if old == nil || n == nil || !sameOwners(old.owners, n.owners) {
		// An owner that waits for its dependents may have lost one that
		// blocked it; a new reference must be checked.
		if old != nil {
			attend = g.unlink(old, attend)
		}
		if n != nil {
			g.link(n)
			attend = append(attend, uid)
		}
	}
	if n == nil {
		delete(g.nodes, uid)
	} else {
		g.nodes[uid] = n
	}
	switch {
	case deleted:
		attend = g.dependentsOf(uid, attend)
	case n != nil && n.deleting && (n.orphan || n.foreground):
		attend = append(attend, uid)
		if n.foreground {
			attend = g.dependentsOf(uid, attend)
		}
	}
	return attend
}

// sameOwners reports whether two lists of references are equal.
func sameOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.UID == y.UID && x.Name == y.Name && x.Kind == y.Kind && x.APIVersion == y.APIVersion &&
			isTrue(x.Controller) == isTrue(y.Controller) && isTrue(x.BlockOwnerDeletion) == isTrue(y.BlockOwnerDeletion)
	})
}

func isTrue(b *bool) bool { return b != nil && *b }

// link adds n to its owners' dependents.
func (g *graph) link(n *node) {
	for _, r := range n.owners {
		deps := g.dependents[r.UID]
		if deps == nil {
			deps = &uidSet{}
			g.dependents[r.UID] = deps
		}
		deps.add(n.uid)
	}
}

// unlink removes n from its owners' dependents, and adds to attend the
// owners that wait for their dependents.
func (g *graph) unlink(n *node, attend []types.UID) []types.UID {
	for _, r := range n.owners {
		if deps := g.dependents[r.UID]; deps != nil {
			deps.remove(n.uid)
			if deps.len() == 0 {
				delete(g.dependents, r.UID)
			}
		}
		if o := g.nodes[r.UID]; o != nil && o.waitsForDependents() {
			attend = append(attend, r.UID)
		}
	}
	return attend
}

// dependentsOf appends owner's dependents to attend.
func (g *graph) dependentsOf(owner types.UID, attend []types.UID) []types.UID {
	g.dependents[owner].each(func(d types.UID) { attend = append(attend, d) })
	return attend
}

// get returns a copy of uid's node, nil when there is none.
func (g *graph) get(uid types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	c := *n
	return &c
}

// dependentNodes returns copies of owner's dependents' nodes.
func (g *graph) dependentNodes(owner types.UID) []*node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*node
	g.dependents[owner].each(func(d types.UID) {
		if n := g.nodes[d]; n != nil {
			c := *n
			out = append(out, &c)
		}
	})
	return out
}

// waits reports whether uid's node is in a foreground deletion.
func (g *graph) waits(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	return n != nil && n.waitsForDependents()
}

// hasDependents reports whether any object names uid as its owner.
func (g *graph) hasDependents(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dependents[uid].len() > 0
}

// afterList returns, once res has been listed again, the nodes of its
// kind the list did not bring (seen: objects deleted while no watch was
// open), and the UIDs of the nodes that refer to an owner of res's kind
// (gk), which may have gone unseen the same way.
func (g *graph) afterList(res resources.Resource, seen map[types.UID]struct{}, gk schema.GroupKind) (gone []*node, referring []types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid, n := range g.nodes {
		if n.res.Kind == res.Kind {
			if _, ok := seen[uid]; !ok {
				gone = append(gone, n)
				continue
			}
		}
		for _, r := range n.owners {
			if schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).GroupKind() == gk {
				referring = append(referring, uid)
				break
			}
		}
	}
	return gone, referring
}

// size returns the number of nodes and of owners with dependents.
func (g *graph) size() (nodes, owners int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nodes), len(g.dependents)
}
