package multi

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// leaseInformer is a client-go informer of every Lease through one
// replica, which also checks that no update it delivers moves a Lease's
// resourceVersion backwards.
type leaseInformer struct {
	name   string // where it connects
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex // guards backwards
	backwards []string
}

// startInformer starts an informer through c, named name in messages,
// and waits until it has synced.
func startInformer(t testing.TB, name string, c kubernetes.Interface) *leaseInformer {
	t.Helper()
	f := informers.NewSharedInformerFactory(c, 0)
	li := &leaseInformer{name: name, client: c, inf: f.Coordination().V1().Leases().Informer(), stopCh: make(chan struct{}), done: make(chan struct{})}
	_, err := li.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*coordinationv1.Lease), newObj.(*coordinationv1.Lease)
			if rvOf(nil, n.ResourceVersion) < rvOf(nil, o.ResourceVersion) {
				li.mu.Lock()
				li.backwards = append(li.backwards, fmt.Sprintf("%s/%s: %s after %s", n.Namespace, n.Name, n.ResourceVersion, o.ResourceVersion))
				li.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(li.done)
		li.inf.Run(li.stopCh)
	}()
	t.Cleanup(li.stop)
	waitUntil(t, readyTimeout, "the informer to sync", li.inf.HasSynced)
	return li
}

// stop stops the informer and waits for it; safe to call twice.
func (li *leaseInformer) stop() {
	li.once.Do(func() { close(li.stopCh) })
	<-li.done
}

// checkInSync waits until the informer's store equals a fresh list through
// the same replica (names and resourceVersions), after the writes stopped.
func (li *leaseInformer) checkInSync(t testing.TB) {
	name := li.name
	t.Helper()
	li.mu.Lock()
	for _, b := range li.backwards {
		t.Errorf("informer on %s: resourceVersion went backwards: %s", name, b)
	}
	li.mu.Unlock()
	var diff string
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := li.client.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{})
		if err == nil {
			want := map[string]string{}
			for _, l := range list.Items {
				want[l.Namespace+"/"+l.Name] = l.ResourceVersion
			}
			got := map[string]string{}
			for _, o := range li.inf.GetStore().List() {
				l := o.(*coordinationv1.Lease)
				got[l.Namespace+"/"+l.Name] = l.ResourceVersion
			}
			if diff = cmp.Diff(want, got); diff == "" {
				return
			}
		} else {
			diff = err.Error()
		}
		if time.Now().After(deadline) {
			t.Errorf("informer on %s out of sync with a fresh list (-list +informer):\n%s", name, diff)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
