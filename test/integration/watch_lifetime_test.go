package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// protocols are the two ways clients reach the server: client-go and
// kubectl speak HTTP/2 over TLS; proxies and old clients HTTP/1.1.
var protocols = []struct {
	name       string
	nextProtos []string
}{
	{"HTTP/2", nil},
	{"HTTP/1.1", []string{"http/1.1"}},
}

func withProtocol(cfg *rest.Config, nextProtos []string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.TLSClientConfig.NextProtos = nextProtos
	return cfg
}

// requestCounter counts the requests a client sends, by verb.
type requestCounter struct {
	lists, watches atomic.Int64
}

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				c.watches.Add(1)
			} else if req.Method == http.MethodGet {
				c.lists.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

// TestQuietWatchesLive: a watch that goes quiet after an event lives on,
// over HTTP/2 and HTTP/1.1: neither an informer nor a plain watch is cut
// off by the per-write deadline of the stream, which only a write that
// blocks may reach. The write timeout is shortened to a second, so that
// a few seconds of quiet stand for many minutes of the default 60 s.
func TestQuietWatchesLive(t *testing.T) {
	t.Parallel()
	const writeTimeout = time.Second
	s := testserver.Start(t, func(c *server.Config) { c.WatchWriteTimeout = writeTimeout })
	admin := s.Client(t)
	for i, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ns := fmt.Sprintf("quiet-%d", i)
			must[*corev1.Namespace](t)(admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
			leases := admin.CoordinationV1().Leases(ns)
			lease := must[*coordinationv1.Lease](t)(leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{}))

			// An informer, counting its requests: one streaming list,
			// then nothing more while the namespace is quiet.
			var count requestCounter
			c := secClient(t, count.wrap(withProtocol(s.Config, p.nextProtos)))
			factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
			inf := factory.Coordination().V1().Leases().Informer()
			var watchErrs atomic.Int64
			if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
				watchErrs.Add(1)
				t.Logf("informer watch error: %v", err)
			}); err != nil {
				t.Fatal(err)
			}
			seen := make(chan string, 16)
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				UpdateFunc: func(_, obj any) { seen <- obj.(*coordinationv1.Lease).ResourceVersion },
			}); err != nil {
				t.Fatal(err)
			}
			factory.Start(t.Context().Done())
			t.Cleanup(factory.Shutdown)
			if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}

			// A plain watch from the same revision, on the same protocol.
			w := must[watch.Interface](t)(c.CoordinationV1().Leases(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: lease.ResourceVersion}))
			defer w.Stop()

			// One event, then quiet for six write timeouts.
			lease.Spec.HolderIdentity = ptr("a")
			lease = must[*coordinationv1.Lease](t)(leases.Update(t.Context(), lease, metav1.UpdateOptions{}))
			wantEvent(t, w, watch.Modified, "l")
			waitRV(t, seen, lease.ResourceVersion)
			lists, watches := count.lists.Load(), count.watches.Load()
			time.Sleep(6 * writeTimeout)

			// Still the same streams: the next change arrives on them.
			lease.Spec.HolderIdentity = ptr("b")
			lease = must[*coordinationv1.Lease](t)(leases.Update(t.Context(), lease, metav1.UpdateOptions{}))
			wantEvent(t, w, watch.Modified, "l")
			waitRV(t, seen, lease.ResourceVersion)
			if n := watchErrs.Load(); n != 0 {
				t.Errorf("the informer's watch failed %d times", n)
			}
			if l, w := count.lists.Load(), count.watches.Load(); l != lists || w != watches {
				t.Errorf("the informer sent %d lists and %d watches while quiet, want none", l-lists, w-watches)
			}
		})
	}
}

// waitRV waits for the informer to report an update at rv.
func waitRV(t *testing.T, seen <-chan string, rv string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case got := <-seen:
			if got == rv {
				return
			}
		case <-timeout:
			t.Fatalf("the informer did not see resourceVersion %s", rv)
		}
	}
}

// TestWatchLifetime: a watch ends cleanly, with no ERROR event and no
// broken stream, at its timeoutSeconds, or without one after a random
// time between the server's minimum request timeout and twice that.
func TestWatchLifetime(t *testing.T) {
	t.Parallel()
	const minTimeout = 2 * time.Second
	s := testserver.Start(t, func(c *server.Config) {
		c.MinRequestTimeout = minTimeout
		c.WatchWriteTimeout = 500 * time.Millisecond
	})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			tr, err := rest.TransportFor(withProtocol(s.Config, p.nextProtos))
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				query    string
				min, max time.Duration
			}{
				{"&timeoutSeconds=1", time.Second, minTimeout},
				{"", minTimeout, 2*minTimeout + 2*time.Second},
			} {
				req := must[*http.Request](t)(http.NewRequestWithContext(t.Context(), "GET",
					s.URL()+"/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=true&allowWatchBookmarks=true"+tc.query, nil))
				start := time.Now()
				resp := must[*http.Response](t)(tr.RoundTrip(req))
				if resp.StatusCode != http.StatusOK || resp.ProtoMajor != map[bool]int{true: 2, false: 1}[p.nextProtos == nil] {
					t.Fatalf("%s: %s %d", tc.query, resp.Proto, resp.StatusCode)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				if err != nil {
					t.Errorf("watch%s ended with %v after %v, want a clean end", tc.query, err, took)
				}
				if strings.Contains(string(body), `"ERROR"`) {
					t.Errorf("watch%s ended with an ERROR event: %s", tc.query, body)
				}
				if took < tc.min || took > tc.max {
					t.Errorf("watch%s lasted %v, want between %v and %v", tc.query, took, tc.min, tc.max)
				}
			}
		})
	}
}

// TestStuckWatcherDisconnected: a watcher that stops reading is cut off
// once a write has waited the write timeout, over HTTP/2 (its stream is
// reset) and HTTP/1.1 (its connection is closed), and the server goes on
// serving everyone else, watches included.
func TestStuckWatcherDisconnected(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *server.Config) { c.WatchWriteTimeout = time.Second })
	admin := s.Client(t)
	for i, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ns := fmt.Sprintf("stuck-%d", i)
			must[*corev1.Namespace](t)(admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
			eps := admin.CoreV1().Endpoints(ns)
			tr := stuckTransport(t, s.Config, p.nextProtos == nil)
			req := must[*http.Request](t)(http.NewRequestWithContext(t.Context(), "GET", s.URL()+"/api/v1/namespaces/"+ns+"/endpoints?watch=true", nil))
			resp := must[*http.Response](t)(tr.RoundTrip(req))
			defer resp.Body.Close()

			// ~13 MB of events the watcher does not read: more than its
			// small receive buffers and the server's send buffers hold,
			// whatever the speed of the machine.
			big := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Subsets: []corev1.EndpointSubset{{}}}
			for j := range 30000 {
				big.Subsets[0].Addresses = append(big.Subsets[0].Addresses, corev1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", j/62500, j/250%250, j%250+1)})
			}
			for j := range 20 {
				big.Subsets[0].Ports = []corev1.EndpointPort{{Port: int32(j + 1)}}
				if _, err := eps.Update(t.Context(), big, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("update %d: %v", j, err)
				}
			}
			// The server's write has been blocked for longer than the
			// write timeout; reading now drains what was buffered and then
			// finds the stream broken, not merely idle.
			time.Sleep(3 * time.Second)
			done := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, resp.Body)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Error("the stuck watch ended cleanly; want it cut off")
				}
			case <-time.After(60 * time.Second):
				t.Error("the stuck watch was not cut off")
			}

			// Everyone else is served.
			checkServes(t, admin, ns)
		})
	}
}

// stuckTransport is a client transport with small receive buffers (a 64 KiB
// HTTP/2 window, or a 256 KiB socket buffer for HTTP/1.1, where the
// kernel's autotuning would grow it to tens of megabytes), so that a
// reader that stops reading blocks the server's writes after a few
// megabytes.
func stuckTransport(t *testing.T, cfg *rest.Config, http2 bool) *http.Transport {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{
		TLSClientConfig: tlsConfig,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.SetReadBuffer(256 << 10)
			}
			return conn, err
		},
	}
	if http2 {
		tr.ForceAttemptHTTP2 = true
		tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10}
	} else {
		tlsConfig.NextProtos = []string{"http/1.1"}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// checkServes checks that a list and a new watch work.
func checkServes(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	must[*corev1.EndpointsList](t)(c.CoreV1().Endpoints(ns).List(t.Context(), metav1.ListOptions{}))
	w := must[watch.Interface](t)(c.CoreV1().Endpoints(ns).Watch(t.Context(), metav1.ListOptions{}))
	defer w.Stop()
	must[*corev1.Endpoints](t)(c.CoreV1().Endpoints(ns).Create(t.Context(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}))
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if o, isEp := ev.Object.(*corev1.Endpoints); isEp && o.Name == "after" {
				return
			}
		case <-time.After(20 * time.Second):
			t.Fatal(errors.New("no event for the new endpoints"))
		}
	}
}
