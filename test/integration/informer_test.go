package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// churn creates, updates and deletes leases and endpoints in namespaces
// until ctx ends.
func churn(ctx context.Context, t *testing.T, c kubernetes.Interface, namespaces []string, workers int) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				ns := namespaces[rand.IntN(len(namespaces))]
				name := fmt.Sprintf("c%d-%d", w, rand.IntN(8))
				var err error
				switch rand.IntN(4) {
				case 0:
					err = c.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{})
				case 1:
					_, err = c.CoreV1().Endpoints(ns).Update(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name},
						Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.0.0.%d", i%250+1)}}}}}, metav1.UpdateOptions{})
				default:
					l, gerr := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(gerr) {
						_, err = c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
					} else if gerr == nil {
						l.Spec.HolderIdentity = ptr(fmt.Sprint(i))
						_, err = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
					} else {
						err = gerr
					}
				}
				if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
					t.Errorf("churn: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// versions maps namespace/name to resourceVersion.
func versions[T runtime.Object](items []T) map[string]string {
	out := map[string]string{}
	for _, it := range items {
		m, _ := meta.Accessor(it)
		out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
	}
	return out
}

func storeVersions(s cache.Store) map[string]string {
	out := map[string]string{}
	for _, it := range s.List() {
		m, _ := meta.Accessor(it)
		out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
	}
	return out
}

// waitInSync waits until each informer store equals a fresh list.
func waitInSync(t *testing.T, c kubernetes.Interface, leases, eps, nss cache.Store) {
	t.Helper()
	ctx := t.Context()
	var diff string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		l, err1 := c.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
		e, err2 := c.CoreV1().Endpoints("").List(ctx, metav1.ListOptions{})
		n, err3 := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatal(err1, err2, err3)
		}
		diff = cmp.Diff(versions(ptrs(l.Items)), storeVersions(leases)) +
			cmp.Diff(versions(ptrs(e.Items)), storeVersions(eps)) +
			cmp.Diff(versions(ptrs(n.Items)), storeVersions(nss))
		if diff == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("informers out of sync with a fresh list (-list +informer):\n%s", diff)
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func TestInformersStayInSync(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// A small event window, so that a client resuming after a restart
	// finds its revision gone and must re-list (410).
	small := func(c *server.Config) { c.WatchWindow = 16 }
	s := testserver.StartIn(t, dataDir, small)
	addr := s.Addr()
	atAddr := func(c *server.Config) { c.Listen = addr }
	ctx := t.Context()
	admin := s.Client(t)
	namespaces := []string{"default", "ns-a", "ns-b"}
	for _, ns := range namespaces[1:] {
		must[*corev1.Namespace](t)(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	}

	// The informers use protobuf, as controllers do, through a proxy that
	// can drop their connections; the config survives a server restart
	// (same address and credentials).
	px := newProxy(t, addr)
	cfg := rest.CopyConfig(s.ProtoConfig())
	cfg.Host = "https://" + px.addr()
	// client-go swallows a 410 inside a watch stream and re-lists; count
	// the re-lists (streaming lists) to see it happen.
	var relists atomic.Int32
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("sendInitialEvents") == "true" {
				relists.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	informerClient := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactory(informerClient, 0)
	li := factory.Coordination().V1().Leases().Informer()
	ei := factory.Core().V1().Endpoints().Informer()
	ni := factory.Core().V1().Namespaces().Informer()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, li.HasSynced, ei.HasSynced, ni.HasSynced) {
		t.Fatal("informers did not sync")
	}

	load, cancel := context.WithTimeout(ctx, 2*time.Second)
	churn(load, t, admin, namespaces, 8)
	cancel()
	waitInSync(t, admin, li.GetStore(), ei.GetStore(), ni.GetStore())

	// Drop the informers' connections and write more than the event
	// window before they can reconnect: their revisions are gone, they get
	// 410 and must re-list.
	before := relists.Load()
	px.cut()
	for i := range 40 {
		must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%d", i)}}, metav1.CreateOptions{}))
	}
	px.restore()
	waitInSync(t, admin, li.GetStore(), ei.GetStore(), ni.GetStore())
	// Only the lease informer's revision left its window (the burst was
	// all leases); the others resume where they were.
	if relists.Load() == before {
		t.Error("no re-list after the gap: the 410 path was not exercised")
	}

	// Restart the server on the same address under load: every watch
	// restarts, and the informers resume or re-list.
	s.Stop()
	s = testserver.StartIn(t, dataDir, small, atAddr)
	admin = s.Client(t)
	load, cancel = context.WithTimeout(ctx, time.Second)
	churn(load, t, admin, namespaces, 4)
	cancel()
	waitInSync(t, admin, li.GetStore(), ei.GetStore(), ni.GetStore())
	names := make([]string, 0)
	for k := range storeVersions(li.GetStore()) {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Logf("%d leases in sync; %d streaming lists in all", len(names), relists.Load())
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// legacyListWatch is a lease ListerWatcher that declines streaming lists,
// as clients before client-go 0.35 (and controllers built on them) do:
// their reflector lists with resourceVersion=0 in pages of 500, then
// watches from the list's revision with bookmarks, and lists again after
// a 410.
type legacyListWatch struct{ *cache.ListWatch }

func (legacyListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func TestInformerListThenWatch(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *server.Config) { c.WatchWindow = 16 })
	ctx := t.Context()
	admin := s.Client(t)
	px := newProxy(t, s.Addr())
	cfg := rest.CopyConfig(s.ProtoConfig())
	cfg.Host = "https://" + px.addr()
	var lists, watches, streaming atomic.Int32
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			switch {
			case q.Get("sendInitialEvents") != "":
				streaming.Add(1)
			case q.Get("watch") == "true":
				if q.Get("allowWatchBookmarks") != "true" || q.Get("resourceVersion") == "" {
					t.Errorf("watch %s: want bookmarks from the list's revision", req.URL.RawQuery)
				}
				watches.Add(1)
			default:
				if lists.Add(1) == 1 && (q.Get("limit") != "500" || q.Get("resourceVersion") != "0") {
					t.Errorf("first list %s: want resourceVersion=0 in pages of 500", req.URL.RawQuery)
				}
			}
			return rt.RoundTrip(req)
		})
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	lw := legacyListWatch{cache.NewListWatchFromClient(c.CoordinationV1().RESTClient(), "leases", metav1.NamespaceAll, fields.Everything())}
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	load, cancel := context.WithTimeout(ctx, 2*time.Second)
	churn(load, t, admin, []string{"default"}, 4)
	cancel()
	waitLeasesInSync(t, admin, inf.GetStore())

	// Past the event window while disconnected: 410, then a new list.
	before := lists.Load()
	px.cut()
	for i := range 40 {
		must[*coordinationv1.Lease](t)(admin.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%d", i)}}, metav1.CreateOptions{}))
	}
	px.restore()
	waitLeasesInSync(t, admin, inf.GetStore())
	if lists.Load() == before {
		t.Error("no list after the gap: the 410 path was not exercised")
	}
	if streaming.Load() != 0 || watches.Load() == 0 {
		t.Errorf("%d streaming lists, %d watches: want list-then-watch only", streaming.Load(), watches.Load())
	}
}

func waitLeasesInSync(t *testing.T, c kubernetes.Interface, store cache.Store) {
	t.Helper()
	var diff string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l := must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{}))
		if diff = cmp.Diff(versions(ptrs(l.Items)), storeVersions(store)); diff == "" {
			return
		}
	}
	t.Fatalf("informer out of sync with a fresh list (-list +informer):\n%s", diff)
}
