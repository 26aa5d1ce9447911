package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// MirrorConfig describes the mirroring scenario.
type MirrorConfig struct {
	Namespace string
	// Endpoints objects of Addresses addresses each are created, by
	// Clients clients, then Burst of them updated at once.
	Endpoints, Addresses, Burst, Clients int
}

// Mirror measures what mirroring Endpoints into EndpointSlices costs a
// server: it creates Endpoints (named ep-NNNNNN, one port, Addresses IPs
// each), reports how long the server took to mirror them all and what
// the server's heap grew by per Endpoints (its slice, the Endpoints
// itself, and both in the watch cache), then updates Burst of them at
// once (each changes one address) and reports how long until every
// mirrored slice held its change. It watches the namespace's slices to
// see them.
func Mirror(ctx context.Context, e *Env, mc MirrorConfig) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mc.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	seen := newSliceTracker()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watching := make(chan error, 1)
	go func() { watching <- seen.follow(wctx, c, mc.Namespace) }()
	heapBefore, err := heapInUse(ctx, c)
	if err != nil {
		return err
	}
	rssBefore := e.rss()

	start := time.Now()
	err = parallel(ctx, mc.Endpoints, mc.Clients, func(i int) error {
		_, err := c.CoreV1().Endpoints(mc.Namespace).Create(ctx, mirrorEndpoints(i, mc.Addresses, 0), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	created := time.Since(start)
	if err := seen.wait(ctx, watching, func(s map[string]string) bool { return len(s) >= mc.Endpoints }); err != nil {
		return err
	}
	mirrored := time.Since(start)
	fmt.Fprintf(e.Out, "mirror: %d Endpoints of %d addresses created in %v (%s), all mirrored %v after the first create\n",
		mc.Endpoints, mc.Addresses, created.Round(time.Millisecond), rate(int64(mc.Endpoints), created), mirrored.Round(time.Millisecond))
	// Let the writes' garbage go before reading the heap.
	time.Sleep(5 * time.Second)
	heapAfter, err := heapInUse(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "mirror: server heap in use %.1f -> %.1f MiB: %.1f KiB per mirrored Endpoints (Endpoints, slice, caches)",
		float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), float64(heapAfter-heapBefore)/1024/float64(mc.Endpoints))
	if rssBefore > 0 {
		fmt.Fprintf(e.Out, "; RSS %.1f -> %.1f MiB", float64(rssBefore)/(1<<20), float64(e.rss())/(1<<20))
	}
	fmt.Fprintln(e.Out)

	burst := min(mc.Burst, mc.Endpoints)
	proc := StartSampling(e.PIDs)
	start = time.Now()
	err = parallel(ctx, burst, mc.Clients, func(i int) error {
		_, err := c.CoreV1().Endpoints(mc.Namespace).Update(ctx, mirrorEndpoints(i, mc.Addresses, 1), metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("updating: %w", err)
	}
	written := time.Since(start)
	if err := seen.wait(ctx, watching, func(s map[string]string) bool {
		for i := range burst {
			if !strings.Contains(s[endpointsName(i)], ","+changedIP(i)+",") {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("waiting for the burst to be mirrored: %w", err)
	}
	fmt.Fprintf(e.Out, "mirror: burst of %d updates written in %v, all mirrored %v after the first\n",
		burst, written.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(burst), "mirrored update"))
	}
	return nil
}

func endpointsName(i int) string { return fmt.Sprintf("ep-%06d", i) }

// changedIP is the first address of Endpoints i after the burst.
func changedIP(i int) string { return fmt.Sprintf("10.%d.%d.250", 100+i/65536, i/256%256) }

// mirrorEndpoints is Endpoints i of the scenario, at version v (1: its
// first address changed).
func mirrorEndpoints(i, addresses, v int) *corev1.Endpoints {
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: endpointsName(i), Labels: map[string]string{"app": "bench"}},
		Subsets:    []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	}
	for a := range addresses {
		// 10.x.y.a: x.y from i, a from the address's index.
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, a+1)})
	}
	if v == 1 && addresses > 0 {
		ep.Subsets[0].Addresses[0].IP = changedIP(i)
	}
	return ep
}

// parallel runs f(0..n-1) on clients goroutines; the first error ends it.
func parallel(ctx context.Context, n, clients int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// sliceTracker holds, per Endpoints name, the addresses of its mirrored
// slice (",a,b,"), as a watch of slices reports them.
type sliceTracker struct {
	mu      sync.Mutex
	byName  map[string]string
	changed chan struct{}
}

func newSliceTracker() *sliceTracker {
	return &sliceTracker{byName: map[string]string{}, changed: make(chan struct{}, 1)}
}

// follow watches the slices of namespace until ctx ends, resuming after
// a watch ends.
func (t *sliceTracker) follow(ctx context.Context, c kubernetes.Interface, namespace string) error {
	rv := ""
	for ctx.Err() == nil {
		w, err := c.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			rv = s.ResourceVersion
			name := s.Labels[discoveryv1.LabelServiceName]
			if ev.Type == watch.Bookmark || name == "" {
				continue
			}
			t.mu.Lock()
			if ev.Type == watch.Deleted || len(s.Endpoints) == 0 {
				delete(t.byName, name)
			} else {
				var all []string
				for _, e := range s.Endpoints {
					all = append(all, e.Addresses...)
				}
				t.byName[name] = "," + strings.Join(all, ",") + ","
			}
			t.mu.Unlock()
			select {
			case t.changed <- struct{}{}:
			default:
			}
		}
		w.Stop()
	}
	return nil
}

// wait returns once done holds of the tracked slices, or the watch
// failed.
func (t *sliceTracker) wait(ctx context.Context, watching <-chan error, done func(map[string]string) bool) error {
	for {
		t.mu.Lock()
		ok := done(t.byName)
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-watching:
			if err == nil {
				err = errors.New("the watch of slices ended")
			}
			return err
		case <-t.changed:
		case <-time.After(time.Second):
		}
	}
}

// heapInUse reads go_memstats_heap_inuse_bytes from the server's
// /metrics.
func heapInUse(ctx context.Context, c kubernetes.Interface) (int64, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading /metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, errors.New("no go_memstats_heap_inuse_bytes in /metrics")
}

// rss is the summed RSS of the server processes, 0 when unknown.
func (e *Env) rss() int64 {
	var sum int64
	for _, pid := range e.PIDs {
		n, err := RSS(pid)
		if err != nil {
			return 0
		}
		sum += n
	}
	return sum
}
