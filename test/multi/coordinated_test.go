package multi

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	electioncontroller "github.com/leasehold/leasehold/internal/controllers/election"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/electiontest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestCoordinatedLeaderElection runs electiontest's scenarios with the
// candidates spread over three replicas on etcd: the coordinated leader
// election controller runs in one replica; the handovers keep the bounds
// of a single server. Then the replica running the controller is killed:
// another takes the controller over, and the preferred-holder scenario
// runs against the two left. From the replicas' logs: the controller ran
// in one replica at a time, and every write it made came from the replica
// running it then.
func TestCoordinatedLeaderElection(t *testing.T) {
	d, acts := deployWatched(t, electioncontroller.Name)
	first := acts.waitRunning(t, -1)
	t.Logf("the controller runs in %s", d.replicas[first].Name())

	electiontest.Handovers(t, electiontest.Env{
		Client:    func(i int) kubernetes.Interface { return d.clientFor(t, i%len(d.replicas)) },
		Namespace: "cle",
		Slack:     time.Second,
	})

	d.replicas[first].Kill(t)
	killed := time.Now()
	next := acts.waitRunning(t, first)
	t.Logf("the controller runs in %s, %v after %s was killed", d.replicas[next].Name(), time.Since(killed).Round(time.Millisecond), d.replicas[first].Name())
	alive := d.others(first)
	electiontest.PreferredHolderGone(t, electiontest.Env{
		Client:    func(i int) kubernetes.Interface { return d.clientFor(t, alive[i%len(alive)]) },
		Namespace: "cle-stall",
		Slack:     time.Second,
	})
	acts.check(t, len(d.replicas))
}

// The messages of the controllers' log that mark a replica starting and
// stopping the controller (internal/controllers), and those of its writes
// (internal/controllers/election).
const (
	runningMsg = "controller elected; running it here"
	stoppedMsg = "controller no longer runs here"
)

// writeMsgs are the messages of the controllers' writes other than a
// Lease's: the election controller's pings and deletions, the mirroring
// and registrations controllers' writes of slices, the garbage
// collector's deletions.
var writeMsgs = []string{"pinged candidate", "deleted expired candidate", "mirrored endpoints", "wrote a service's slices", "collected"}

// isWrite reports whether msg is the log of one of the controller's
// writes: a ping, a deletion, or a Lease write ("lease ...").
func isWrite(msg string) bool {
	for _, m := range writeMsgs {
		if msg == m {
			return true
		}
	}
	return len(msg) > len("lease ") && msg[:len("lease ")] == "lease "
}

// action is one log record of the coordinated leader election controller
// in one replica.
type action struct {
	replica int
	at      time.Time
	msg     string
}

// actions records the controller's log records of every replica.
type actions struct {
	mu   sync.Mutex // guards list
	list []action
}

func (a *actions) add(act action) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, act)
}

// running returns the replica running the controller by the log, -1 for
// none.
func (a *actions) running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	on := map[int]bool{}
	for _, act := range a.list {
		switch act.msg {
		case runningMsg:
			on[act.replica] = true
		case stoppedMsg:
			on[act.replica] = false
		}
	}
	for r, ok := range on {
		if ok {
			return r
		}
	}
	return -1
}

// waitRunning waits until a replica other than not runs the controller
// and returns it.
func (a *actions) waitRunning(t *testing.T, not int) int {
	t.Helper()
	r := -1
	// The controller's own election: a lease of 15 s, polled every 2 s.
	waitUntil(t, time.Minute, "a replica running the controller", func() bool {
		r = a.running()
		return r >= 0 && r != not
	})
	return r
}

// check checks that the replicas' terms running the controller never
// overlap, and that each write lies within a term of its replica.
func (a *actions) check(t *testing.T, replicas int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	type term struct {
		replica    int
		start, end time.Time
	}
	var terms []term
	open := map[int]int{} // replica -> index in terms of its open term
	writes := map[int]int{}
	for _, act := range a.list {
		switch {
		case act.msg == runningMsg:
			open[act.replica] = len(terms)
			terms = append(terms, term{replica: act.replica, start: act.at})
		case act.msg == stoppedMsg:
			if i, ok := open[act.replica]; ok {
				terms[i].end = act.at
				delete(open, act.replica)
			}
		case isWrite(act.msg):
			writes[act.replica]++
			i, ok := open[act.replica]
			if !ok || act.at.Before(terms[i].start) {
				t.Errorf("replica r%d wrote (%s) at %v while not running the controller", act.replica, act.msg, act.at.Format(time.StampMicro))
			}
		}
	}
	now := time.Now()
	for i, x := range terms {
		for _, y := range terms[i+1:] {
			xEnd := x.end
			if xEnd.IsZero() {
				xEnd = now
			}
			if x.replica != y.replica && y.start.Before(xEnd) {
				t.Errorf("r%d ran the controller from %v while r%d ran it (%v to %v)",
					y.replica, y.start.Format(time.StampMicro), x.replica, x.start.Format(time.StampMicro), x.end.Format(time.StampMicro))
			}
		}
	}
	t.Logf("terms running the controller: %d; writes by replica: %v", len(terms), writes)
	if len(writes) == 0 {
		t.Error("the controller wrote nothing")
	}
}

// logRecorder is a slog handler that records one controller's records
// (attribute controller=NAME) of one replica, and passes every record on
// to next.
type logRecorder struct {
	controller string
	acts       *actions
	replica    int
	next       slog.Handler
	// ours is set when the logger's attributes name the controller.
	ours bool
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	ours := h.ours
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "controller" && a.Value.String() == h.controller {
			ours = true
		}
		return !ours
	})
	if ours {
		h.acts.add(action{replica: h.replica, at: r.Time, msg: r.Message})
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == "controller" && a.Value.String() == h.controller {
			c.ours = true
		}
	}
	return &c
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// deployWatched deploys three in-process replicas whose records of the
// controller named controller are kept in the returned actions.
func deployWatched(t *testing.T, controller string) (*deployment, *actions) {
	t.Helper()
	acts := &actions{}
	d := deploy(t, 3, func(t testing.TB, i int, dir, addr string, etcd []string) replica {
		r := &inProcess{name: fmt.Sprintf("r%d", i), dir: dir, addr: addr, etcd: etcd, opts: []testserver.Option{func(c *server.Config) {
			c.Logger = slog.New(&logRecorder{controller: controller, acts: acts, replica: i, next: testserver.Logger().Handler()})
		}}}
		r.start(t)
		return r
	})
	return d, acts
}

// others returns the indexes of d's replicas but not.
func (d *deployment) others(not int) []int {
	var out []int
	for i := range d.replicas {
		if i != not {
			out = append(out, i)
		}
	}
	return out
}
