package watchcache

import "testing"

func TestLabelSetsShareAndRelease(t *testing.T) {
	ls := newLabelSets()
	a := ls.intern(map[string]string{"app": "x", "tier": "db"})
	b := ls.intern(map[string]string{"tier": "db", "app": "x"})
	if &a == nil || len(ls.sets) != 1 {
		t.Fatalf("sets = %d", len(ls.sets))
	}
	a["probe"] = "1" // same map?
	if b["probe"] != "1" {
		t.Fatal("identical label sets did not share a map")
	}
	delete(a, "probe")
	c := ls.intern(map[string]string{"app": "y"})
	if c["app"] != "y" || len(ls.sets) != 2 {
		t.Fatalf("distinct sets: %v %d", c, len(ls.sets))
	}
	ls.release(a)
	if len(ls.sets) != 2 {
		t.Fatal("set released while still used")
	}
	ls.release(b)
	ls.release(c)
	if len(ls.sets) != 0 {
		t.Fatalf("%d sets left after every release", len(ls.sets))
	}
	if ls.intern(nil) != nil || len(ls.sets) != 0 {
		t.Fatal("empty label sets are not tracked")
	}
}
