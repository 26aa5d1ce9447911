package multi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

const watchNamespace = "watch"

// seenEvent is one watch event as the checks compare them.
type seenEvent struct {
	Type   watch.EventType
	Name   string
	RV     int64
	Holder string
}

// recorder watches the leases of watchNamespace through one replica from
// a resourceVersion, as a reflector would: when the server ends the watch
// it watches again from the last resourceVersion it saw. An ERROR event
// (such as 410 Gone) ends it.
type recorder struct {
	replica string
	client  kubernetes.Interface

	mu     sync.Mutex // guards events, err, rewatches
	events []seenEvent
	err    error
	// rewatches counts watches the server ended.
	rewatches int

	cancel context.CancelFunc
	done   chan struct{}
}

func startRecorder(t testing.TB, replica string, c kubernetes.Interface, from string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{replica: replica, client: c, cancel: cancel, done: make(chan struct{})}
	w, err := c.CoordinationV1().Leases(watchNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	go r.run(ctx, w)
	t.Cleanup(r.stop)
	return r
}

func (r *recorder) run(ctx context.Context, w watch.Interface) {
	defer close(r.done)
	last := ""
	for {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() != nil {
					return // stopped: client-go reports the cancellation as an event
				}
				r.mu.Lock()
				r.err = apierrors.FromObject(ev.Object)
				r.mu.Unlock()
				w.Stop()
				return
			}
			l := ev.Object.(*coordinationv1.Lease)
			last = l.ResourceVersion
			r.mu.Lock()
			r.events = append(r.events, seenEvent{Type: ev.Type, Name: l.Name, RV: rvOf(nil, l.ResourceVersion), Holder: ptrValue(l.Spec.HolderIdentity)})
			r.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		var err error
		for {
			w, err = r.client.CoordinationV1().Leases(watchNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: last})
			if err == nil || ctx.Err() != nil {
				break
			}
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
			time.Sleep(50 * time.Millisecond) // the replica is restarting: poll
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.rewatches++
		r.mu.Unlock()
	}
}

func (r *recorder) stop() {
	r.cancel()
	<-r.done
}

// reached reports whether the recorder has seen an event at rv or later,
// or failed.
func (r *recorder) reached(rv int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil || len(r.events) > 0 && r.events[len(r.events)-1].RV >= rv
}

// TestWatchOrderAcrossReplicas writes through one replica, then through all
// of them at once while an etcd member is killed and restarted, with a
// watcher on every replica, and checks that every watcher saw exactly
// etcd's history of the namespace's leases, in order: same events, same
// order, revisions strictly increasing, no gaps.
func TestWatchOrderAcrossReplicas(t *testing.T) {
	d := deploy(t, 3, startInProcess)
	createNamespaces(t, d, watchNamespace)
	list, err := d.clientFor(t, 0).CoordinationV1().Leases(watchNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := list.ResourceVersion
	var recorders []*recorder
	for i := range d.replicas {
		c := d.clientFor(t, i)
		if i == 1 { // one watcher in JSON, the others in protobuf
			c = kubernetes.NewForConfigOrDie(d.configFor(i))
		}
		recorders = append(recorders, startRecorder(t, d.replicas[i].Name(), c, from))
	}

	// Phase 1: one writer through replica 0: creates, updates, deletes.
	write(d.clientFor(t, 0), 0, 300, rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano()))))

	// Phase 2: a writer through every replica at once, on the same leases;
	// an etcd member is killed and restarted meanwhile.
	var wg sync.WaitGroup
	for i := range d.replicas {
		c := d.clientFor(t, i)
		wg.Go(func() { write(c, i, 300, rand.New(rand.NewPCG(uint64(i+2), uint64(time.Now().UnixNano())))) })
	}
	m := d.etcdFollower(t)
	m.Kill()
	t.Logf("killed etcd member %s", m.Name)
	restartEtcd(t, m)
	t.Logf("restarted etcd member %s", m.Name)
	wg.Wait()

	// A last write through replica 0 marks the end.
	end, err := d.clientFor(t, 0).CoordinationV1().Leases(watchNamespace).Create(t.Context(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "end"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endRV := rvOf(t, end.ResourceVersion)
	for _, r := range recorders {
		waitUntil(t, time.Minute, "the watcher on "+r.replica+" to see the last write", func() bool { return r.reached(endRV) })
	}

	want := expectedEvents(t, d, list, endRV)
	for _, r := range recorders {
		r.stop()
		if r.err != nil {
			t.Errorf("watch on %s ended with %v", r.replica, r.err)
		}
		for i := 1; i < len(r.events); i++ {
			if r.events[i].RV <= r.events[i-1].RV {
				t.Errorf("watch on %s: revision %d after %d", r.replica, r.events[i].RV, r.events[i-1].RV)
			}
		}
		if diff := cmp.Diff(want, r.events); diff != "" {
			t.Errorf("watch on %s differs from etcd's history (-etcd +watch):\n%s", r.replica, diff)
		}
		t.Logf("watch on %s: %d events, the same as etcd's history; the server ended it %d times", r.replica, len(r.events), r.rewatches)
	}
}

// write makes n writes of random kinds on leases w0..w9 through c, as
// writer id: create if missing, delete one time in ten, otherwise update
// (a compare-and-swap from a fresh read, retried on conflict).
func write(c kubernetes.Interface, id, n int, rnd *rand.Rand) {
	api := c.CoordinationV1().Leases(watchNamespace)
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("w%d", rnd.IntN(10))
		holder := fmt.Sprintf("writer%d-%d", id, i)
		cur, err := api.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
		case err != nil:
		case rnd.IntN(10) == 0:
			err = api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
		default:
			cur.Spec.HolderIdentity = &holder
			_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		}
		// Conflicts, races with other writers and answers lost while etcd
		// fails over are part of the load; the check compares the watches
		// with what etcd stored, whatever it was.
		_ = err
	}
}

// expectedEvents is the watch events etcd's history implies after the
// list, up to end: ADDED for a key that did not exist, MODIFIED for one
// that did, DELETED with the last state before the delete (and the
// delete's revision).
func expectedEvents(t testing.TB, d *deployment, list *coordinationv1.LeaseList, end int64) []seenEvent {
	t.Helper()
	start := rvOf(t, list.ResourceVersion)
	live := map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		live[list.Items[i].Name] = &list.Items[i]
	}
	var want []seenEvent
	for _, v := range leaseHistory(t, d.etcd.Client(t), watchNamespace) {
		if v.rev <= start || v.rev > end {
			continue
		}
		switch prev, existed := live[v.name]; {
		case v.deleted:
			var holder string
			if prev != nil {
				holder = ptrValue(prev.Spec.HolderIdentity)
			}
			want = append(want, seenEvent{Type: watch.Deleted, Name: v.name, RV: v.rev, Holder: holder})
			delete(live, v.name)
		case existed:
			want = append(want, seenEvent{Type: watch.Modified, Name: v.name, RV: v.rev, Holder: ptrValue(v.lease.Spec.HolderIdentity)})
			live[v.name] = v.lease
		default:
			want = append(want, seenEvent{Type: watch.Added, Name: v.name, RV: v.rev, Holder: ptrValue(v.lease.Spec.HolderIdentity)})
			live[v.name] = v.lease
		}
	}
	return want
}
