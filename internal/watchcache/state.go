package watchcache

import (
	"github.com/google/btree"

	"github.com/leasehold/leasehold/internal/storage"
)

// State is the content of one resource at one revision. It is immutable and
// safe to read from any number of goroutines.
type State struct {
	// Rev is the store revision the state reflects: every change to the
	// resource up to Rev is in it, none after.
	Rev int64

	prefix     string
	namespaced bool
	tree       *btree.BTreeG[*Object]
}

// Len returns the number of objects.
func (s *State) Len() int { return s.tree.Len() }

// Get returns the object stored under key.
func (s *State) Get(key string) (*Object, bool) {
	return s.tree.Get(probe(key))
}

// Page is one page of a list.
type Page struct {
	Objects []*Object
	// Next is the key to continue from; empty when the list is complete.
	Next string
}

// List returns the selected objects in key order, starting at key from
// (inclusive; "" for the beginning), at most limit of them (0: all).
func (s *State) List(sel Selector, from string, limit int) Page {
	var p Page
	switch {
	case limit > 0:
		p.Objects = make([]*Object, 0, min(limit, s.tree.Len()))
	case sel.Everything():
		p.Objects = make([]*Object, 0, s.tree.Len())
	}
	s.ascend(sel, from, func(o *Object) bool {
		if !o.selected(sel) {
			return true
		}
		if limit > 0 && len(p.Objects) == limit {
			p.Next = o.Key
			return false
		}
		p.Objects = append(p.Objects, o)
		return true
	})
	return p
}

// Count returns the number of objects in sel's key range (its namespace
// or name; not its label and field parts) from key from on: what
// kube-apiserver's remainingItemCount counts. It walks them all.
func (s *State) Count(sel Selector, from string) int {
	n := 0
	s.ascend(sel, from, func(*Object) bool { n++; return true })
	return n
}

// ascend calls fn with the objects of sel's key range from key from on,
// in key order, until fn returns false.
func (s *State) ascend(sel Selector, from string, fn func(*Object) bool) {
	scope, exact := sel.keyScope(s.prefix, s.namespaced)
	if exact {
		if o, ok := s.tree.Get(probe(scope)); ok && scope >= from {
			fn(o)
		}
		return
	}
	// The walk stops at the first object past the range, found by one
	// descent, by pointer: comparing every object's key with the range
	// (a cache miss each) was a quarter of a 20,000-lease list's CPU.
	// A start past the range (a continue token's key, which the client
	// controls) would never meet that object: it reads nothing.
	start := max(scope, from)
	var end *Object
	if after, ok := storage.PrefixEnd(scope); ok {
		if start >= after {
			return
		}
		s.tree.AscendGreaterOrEqual(probe(after), func(o *Object) bool {
			end = o
			return false
		})
	}
	s.tree.AscendGreaterOrEqual(probe(start), func(o *Object) bool {
		return o != end && fn(o)
	})
}

// Each calls fn with the objects of namespace in key order ("" for all
// namespaces, and for a cluster-scoped resource), until fn returns false.
// Like List, it stops at the first key outside the namespace.
func (s *State) Each(namespace string, fn func(*Object) bool) {
	s.ascend(Selector{Namespace: namespace}, "", fn)
}
