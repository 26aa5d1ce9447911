package controllers

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDeadlines(t *testing.T) {
	var d Deadlines
	t0 := time.Unix(1000, 0)
	a, b := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}
	d.Push(t0.Add(2*time.Second), a)
	d.Push(t0.Add(time.Second), b)
	d.Push(t0.Add(3*time.Second), a) // a renewed: the first is stale
	if got := d.Next(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %v", got)
	}
	if got := d.PopDue(t0.Add(2 * time.Second)); !slices.Equal(got, []types.NamespacedName{b, a}) {
		t.Fatalf("PopDue = %v, want b then a's stale deadline", got)
	}
	for range 3000 {
		d.Push(t0, a)
	}
	d.Compact(1, func(push func(time.Time, types.NamespacedName)) { push(t0.Add(time.Hour), a) })
	if got := d.PopDue(t0.Add(time.Hour)); !slices.Equal(got, []types.NamespacedName{a}) {
		t.Fatalf("after Compact: %v, want the live deadline alone", got)
	}
}

func TestQueueRetry(t *testing.T) {
	q := NewQueue[types.NamespacedName]()
	k := types.NamespacedName{Name: "k"}
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 9 {
		got = append(got, q.Retry(k, now, time.Second, 100*time.Second))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 100, 100}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	q.Forget(k)
	if d := q.Retry(k, now, time.Second, 100*time.Second); d != time.Second {
		t.Fatalf("after Forget: %v, want 1s", d)
	}
	if ready, _ := q.Due(now.Add(time.Second)); !slices.Equal(ready, []types.NamespacedName{k}) {
		t.Fatalf("Due = %v", ready)
	}
}
