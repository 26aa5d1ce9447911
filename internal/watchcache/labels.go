package watchcache

import (
	"slices"
	"strings"
)

// labelSets lets cached objects with identical labels share one labels
// map. A fleet's objects often carry the same few labels, and a small Go
// map costs about 300 bytes; cached objects are immutable, so sharing is
// safe. Only the feeder goroutine uses a labelSets.
type labelSets struct {
	// sets maps the canonical form of a label set to the shared map and
	// the number of objects in the work tree using it.
	sets map[string]*labelSet
}

type labelSet struct {
	labels map[string]string
	refs   int
}

// Label sets larger than this are not shared: rare, and costly to key.
const maxSharedLabels = 16

func newLabelSets() *labelSets { return &labelSets{sets: map[string]*labelSet{}} }

// intern returns the shared map equal to m, adopting m when there is none.
func (t *labelSets) intern(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxSharedLabels {
		return m
	}
	key := canonical(m)
	if s, ok := t.sets[key]; ok {
		s.refs++
		return s.labels
	}
	t.sets[key] = &labelSet{labels: m, refs: 1}
	return m
}

// release drops one use of a map returned by intern.
func (t *labelSets) release(m map[string]string) {
	if len(m) == 0 || len(m) > maxSharedLabels {
		return
	}
	key := canonical(m)
	if s, ok := t.sets[key]; ok {
		if s.refs--; s.refs == 0 {
			delete(t.sets, key)
		}
	}
}

// canonical renders a label set with its keys sorted; keys and values
// cannot contain NUL.
func canonical(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}
