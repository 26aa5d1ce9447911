package watchcache

import (
	"strings"

	"github.com/google/btree"
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
	// Remaining counts the objects after this page that the selector's key
	// range holds; only meaningful when the selector has no label or field
	// part (kube-apiserver's remainingItemCount rule).
	Remaining int
}

// List returns the selected objects in key order, starting at key from
// (inclusive; "" for the beginning), at most limit of them (0: all).
func (s *State) List(sel Selector, from string, limit int) Page {
	scope, exact := sel.keyScope(s.prefix, s.namespaced)
	start := scope
	if from > start {
		start = from
	}
	var p Page
	s.tree.AscendGreaterOrEqual(probe(start), func(o *Object) bool {
		if exact && o.Key != scope || !exact && !strings.HasPrefix(o.Key, scope) {
			return false
		}
		if limit > 0 && len(p.Objects) == limit {
			if p.Next == "" {
				if !sel.Everything() && (sel.Label != nil && !sel.Label.Empty() || sel.Field != nil && !sel.Field.Empty()) {
					// With a selector we cannot count what is left without
					// matching it all; find only whether anything is.
					if o.matches(sel) {
						p.Next = o.Key
						return false
					}
					return true
				}
				p.Next = o.Key
			}
			p.Remaining++
			return true
		}
		if o.matches(sel) {
			p.Objects = append(p.Objects, o)
		}
		return true
	})
	return p
}
