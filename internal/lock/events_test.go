//go:build unix

package lock_test

import (
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

// leaseEvents are the Events on the lease name, found as `kubectl describe
// lease` finds them (kubectl/pkg/describe, searchEvents: the involved
// object's kind, name, namespace and uid), oldest first.
func (e *env) leaseEvents(name string) []corev1.Event {
	e.t.Helper()
	l := e.lease(name)
	sel := fields.Set{
		"involvedObject.kind":      "Lease",
		"involvedObject.name":      name,
		"involvedObject.namespace": "default",
		"involvedObject.uid":       string(l.UID),
	}.AsSelector().String()
	list, err := e.client.CoreV1().Events("default").List(e.t.Context(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	evs := list.Items
	slices.SortStableFunc(evs, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
	return evs
}

// TestEvents: `leasehold lock` and `leasehold elect` record client-go's
// leader election Events on the lease, "IDENTITY became leader" and
// "IDENTITY stopped leading", written before they exit.
func TestEvents(t *testing.T) {
	e := newEnv(t)
	for range 2 {
		if code, _ := e.lock("story", nil, "exit", "0").Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	}
	// No waiting: what is not on the server when lock exited is lost.
	evs := e.leaseEvents("story")
	identity := regexp.MustCompile(`^` + regexp.QuoteMeta(mustHostname(t)) + `_[0-9a-f]{16} `)
	var ids, what []string
	for _, ev := range evs {
		id := identity.FindString(ev.Message)
		if id == "" || ev.Reason != "LeaderElection" || ev.Type != corev1.EventTypeNormal || ev.Source.Component != "leasehold-lock" {
			t.Errorf("event %q reason %q type %q from %q", ev.Message, ev.Reason, ev.Type, ev.Source.Component)
			continue
		}
		ids = append(ids, id)
		what = append(what, ev.Message[len(id):])
	}
	if want := []string{"became leader", "stopped leading", "became leader", "stopped leading"}; !slices.Equal(what, want) || len(ids) != 4 ||
		ids[0] != ids[1] || ids[2] != ids[3] || ids[0] == ids[2] {
		t.Errorf("events %q by %q, want two holders each becoming leader then stopping", what, ids)
	}

	a := e.elect("--identity", "a")
	locktest.WaitFor(t, 30*time.Second, "a to lead", func() bool { return slices.Equal(a.Stdout.Lines(), []string{"a"}) })
	a.Signal(t, syscall.SIGTERM)
	if code, _ := a.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("elect exited with %d", code)
	}
	var got []string
	for _, ev := range e.leaseEvents("web") {
		got = append(got, ev.Source.Component+": "+ev.Message)
	}
	if want := []string{"leasehold-elect: a became leader", "leasehold-elect: a stopped leading"}; !slices.Equal(got, want) {
		t.Errorf("elect's events %q, want %q", got, want)
	}
}
