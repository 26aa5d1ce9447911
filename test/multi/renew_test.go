package multi

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// renewNamespace holds the renew load's leases.
	renewNamespace = "renew"
	// renewWorkersPerReplica writers per replica, each owning
	// renewKeysPerWorker leases.
	renewWorkersPerReplica = 2
	renewKeysPerWorker     = 3
	// renewPeriod paces each writer: about 50 writes/s each, 300/s in all.
	renewPeriod = 20 * time.Millisecond
)

// renewKey is what a writer knows about one of its leases: every write
// acknowledged, in order, and the highest sequence number it sent (which
// may have been applied without an acknowledgement).
type renewKey struct {
	name      string
	acked     []renewAck
	attempted int
}

type renewAck struct {
	seq int
	rv  int64
	at  time.Time
}

// renewWorker updates its own leases through one replica as holders do:
// an update carrying the last resourceVersion it saw and a new sequence
// number in holderIdentity, with client-go's typed client (and its retries,
// as real holders have them). Only the worker's goroutine touches keys
// until the load stops.
type renewWorker struct {
	replica int
	client  kubernetes.Interface
	keys    []*renewKey
	acks    atomic.Int64 // acknowledged writes so far
}

type renewLoad struct {
	workers []*renewWorker
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startRenewLoad creates the leases through replica 0 and starts the
// writers.
func startRenewLoad(t testing.TB, d *deployment) *renewLoad {
	t.Helper()
	l := &renewLoad{}
	create := d.clientFor(t, 0).CoordinationV1().Leases(renewNamespace)
	for r := range d.replicas {
		for w := range renewWorkersPerReplica {
			wk := &renewWorker{replica: r, client: d.clientFor(t, r)}
			for k := range renewKeysPerWorker {
				name := fmt.Sprintf("r%d-w%d-k%d", r, w, k)
				out, err := create.Create(t.Context(), &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("0"), LeaseDurationSeconds: ptr[int32](10)},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wk.keys = append(wk.keys, &renewKey{name: name, acked: []renewAck{{seq: 0, rv: rvOf(t, out.ResourceVersion), at: time.Now()}}})
			}
			l.workers = append(l.workers, wk)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, wk := range l.workers {
		l.wg.Go(func() { wk.run(ctx) })
	}
	return l
}

func (wk *renewWorker) run(ctx context.Context) {
	api := wk.client.CoordinationV1().Leases(renewNamespace)
	cur := map[string]*coordinationv1.Lease{}
	tick := time.NewTicker(renewPeriod)
	defer tick.Stop()
	seq := 0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := wk.keys[i%len(wk.keys)]
		l := cur[k.name]
		if l == nil {
			var err error
			if l, err = api.Get(ctx, k.name, metav1.GetOptions{}); err != nil {
				continue
			}
		}
		seq++
		l = l.DeepCopy()
		l.Spec.HolderIdentity = ptr(strconv.Itoa(seq))
		now := metav1.NowMicro()
		l.Spec.RenewTime = &now
		k.attempted = seq
		out, err := api.Update(ctx, l, metav1.UpdateOptions{})
		if err != nil {
			// Maybe applied, maybe not: read it again before the next write.
			delete(cur, k.name)
			continue
		}
		k.acked = append(k.acked, renewAck{seq: seq, rv: rvOf(nil, out.ResourceVersion), at: time.Now()})
		cur[k.name] = out
		wk.acks.Add(1)
	}
}

// stop stops the writers and waits for them.
func (l *renewLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// progress returns the acknowledged writes of each worker so far.
func (l *renewLoad) progress() []int64 {
	var p []int64
	for _, wk := range l.workers {
		p = append(p, wk.acks.Load())
	}
	return p
}

// longestGap is the longest time during which no writer got an
// acknowledgement: the write outage the faults caused (after stop).
func (l *renewLoad) longestGap() time.Duration {
	var at []time.Time
	for _, wk := range l.workers {
		for _, k := range wk.keys {
			for _, a := range k.acked {
				at = append(at, a.at)
			}
		}
	}
	return longestGap(at)
}

// check checks that no acknowledged write was lost: every acknowledged
// write is in etcd's history at the resourceVersion it was acknowledged
// with; each lease's writes appear in the order they were sent; and each
// lease ends at its last acknowledged write, or at a later one that was
// sent without an acknowledgement. It returns the number of acknowledged
// writes and of leases that ended on an unacknowledged write.
func (l *renewLoad) check(t testing.TB, hist []version) (acked, unacked int) {
	t.Helper()
	versions := byName(hist)
	for _, wk := range l.workers {
		for _, k := range wk.keys {
			vs := versions[k.name]
			seqAt := map[int64]int{}
			last := -1
			for _, v := range vs {
				if v.deleted {
					t.Errorf("%s deleted at %d", k.name, v.rev)
					continue
				}
				seq, err := strconv.Atoi(ptrValue(v.lease.Spec.HolderIdentity))
				if err != nil {
					t.Errorf("%s at %d: holder %q", k.name, v.rev, ptrValue(v.lease.Spec.HolderIdentity))
					continue
				}
				if seq <= last {
					t.Errorf("%s: write %d stored at %d after write %d: out of order or applied twice", k.name, seq, v.rev, last)
				}
				last = seq
				seqAt[v.rev] = seq
			}
			for _, a := range k.acked {
				acked++
				if got, ok := seqAt[a.rv]; !ok || got != a.seq {
					t.Errorf("%s: acknowledged write %d at resourceVersion %d is not in etcd's history (found %d, %v)", k.name, a.seq, a.rv, got, ok)
				}
			}
			final := k.acked[len(k.acked)-1]
			switch {
			case last < final.seq:
				t.Errorf("%s: ends at write %d, before its last acknowledged write %d: an acknowledged write was lost", k.name, last, final.seq)
			case last > k.attempted:
				t.Errorf("%s: ends at write %d, which was never sent (last sent %d)", k.name, last, k.attempted)
			case last > final.seq:
				unacked++
			}
		}
	}
	return acked, unacked
}

// finalVersions returns the last version of every lease in a history.
func finalVersions(hist []version) map[string]version {
	m := map[string]version{}
	for _, v := range hist {
		m[v.name] = v
	}
	return m
}

// checkReadsAgree checks that a consistent read of every lease of the
// namespace through every replica returns etcd's final version.
func checkReadsAgree(t testing.TB, d *deployment, namespace string, hist []version) {
	t.Helper()
	final := finalVersions(hist)
	for i := range d.replicas {
		list, err := d.clientFor(t, i).CoordinationV1().Leases(namespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Errorf("list through %s: %v", d.replicas[i].Name(), err)
			continue
		}
		got := map[string]int64{}
		for _, l := range list.Items {
			got[l.Name] = rvOf(t, l.ResourceVersion)
		}
		for name, v := range final {
			if v.deleted {
				if _, ok := got[name]; ok {
					t.Errorf("%s: %s/%s was deleted at %d but lists at %d", d.replicas[i].Name(), namespace, name, v.rev, got[name])
				}
				continue
			}
			if got[name] != v.rev {
				t.Errorf("%s: %s/%s lists at resourceVersion %d, etcd has %d", d.replicas[i].Name(), namespace, name, got[name], v.rev)
			}
		}
		live := 0
		for _, v := range final {
			if !v.deleted {
				live++
			}
		}
		if len(got) != live {
			t.Errorf("%s: %d leases in %s, etcd has %d", d.replicas[i].Name(), len(got), namespace, live)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// rvOf parses a resourceVersion; t nil means the caller cannot fail (the
// server's resourceVersions are numbers), and 0 is returned on error.
func rvOf(t testing.TB, rv string) int64 {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil && t != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}
