package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sercand/kuberesolver/v6"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// backend is a real gRPC server on loopback that counts the calls it
// answers.
type backend struct {
	addr  string // its loopback listener
	calls atomic.Int64
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: l.Addr().String()}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.calls.Add(1)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return b
}

// resolverClient is kuberesolver's client interface over client-go's
// transport (the server's CA and credentials): kuberesolver's own
// clients know only in-cluster service accounts and plain HTTP.
type resolverClient struct {
	host string
	http *http.Client
}

func (c *resolverClient) Do(req *http.Request) (*http.Response, error) { return c.http.Do(req) }
func (c *resolverClient) Host() string                                 { return c.host }
func (c *resolverClient) GetRequest(url string) (*http.Request, error) {
	if !strings.HasPrefix(url, c.host) {
		url = c.host + "/" + url
	}
	return http.NewRequest(http.MethodGet, url, nil)
}

// TestGRPCResolver: a gRPC client whose name resolver reads
// EndpointSlices (kuberesolver v6, as gRPC services in Kubernetes use)
// finds servers registered in leasehold, as a slice and as an Endpoints
// that is mirrored, spreads its calls over them, and stops calling one
// once it is removed. (See grpcEnv for the addresses.)
func TestGRPCResolver(t *testing.T) {
	ts := testserver.Start(t)
	c := ts.Client(t)
	ctx := t.Context()
	g := newGRPCEnv(t, ts, 3)
	registered := g.registered
	ns := "grpc"
	must[*corev1.Namespace](t)(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))

	spread := func(t *testing.T, service string, want []string) {
		t.Helper()
		g.spread(t, ns, service, want)
	}

	t.Run("registered as a slice", func(t *testing.T) {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "direct-1", Labels: map[string]string{discoveryv1.LabelServiceName: "direct"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("grpc"), Port: ptr[int32](50051)}},
		}
		for _, ip := range registered {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
		}
		slice = must[*discoveryv1.EndpointSlice](t)(c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}))
		spread(t, "direct", registered)
		// One goes: the client stops calling it.
		slice.Endpoints[2].Conditions.Ready = ptr(false)
		must[*discoveryv1.EndpointSlice](t)(c.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}))
		spread(t, "direct", registered[:2])
	})

	t.Run("registered as an Endpoints, mirrored", func(t *testing.T) {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "mirrored"},
			Subsets:    []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "grpc", Port: 50051}}}},
		}
		for _, ip := range registered {
			ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip})
		}
		ep = must[*corev1.Endpoints](t)(c.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}))
		spread(t, "mirrored", registered)
		// One leaves the Endpoints; the mirrored slice and the client
		// follow.
		ep.Subsets[0].Addresses = ep.Subsets[0].Addresses[1:]
		must[*corev1.Endpoints](t)(c.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}))
		spread(t, "mirrored", registered[1:])
	})
}

// grpcEnv is real gRPC servers on loopback, registered at addresses of
// 192.0.2.0/24 (TEST-NET-1): slices may not hold loopback addresses
// (kube-apiserver's rule), so the clients' dialer carries each to its
// server's loopback listener; and a kuberesolver builder reading the
// test server's EndpointSlices.
type grpcEnv struct {
	builder    resolver.Builder
	dial       func(context.Context, string) (net.Conn, error)
	backends   map[string]*backend // by registered address
	registered []string
}

func newGRPCEnv(t *testing.T, ts *testserver.Server, n int) *grpcEnv {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(ts.Config)
	if err != nil {
		t.Fatal(err)
	}
	g := &grpcEnv{
		builder:  kuberesolver.NewBuilder(&resolverClient{host: strings.TrimSuffix(ts.Config.Host, "/"), http: httpClient}, "kubernetes"),
		backends: map[string]*backend{},
	}
	for i := range n {
		ip := fmt.Sprintf("192.0.2.%d", i+1)
		g.backends[ip] = startBackend(t)
		g.registered = append(g.registered, ip)
	}
	g.dial = func(ctx context.Context, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		b := g.backends[host]
		if b == nil {
			return nil, fmt.Errorf("no server registered at %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", b.addr)
	}
	return g
}

// spread makes calls to ns/service through a gRPC client resolving with
// kuberesolver until every backend in want answered some of 30 calls in
// a row and the others none; it fails the test after 20 s.
func (g *grpcEnv) spread(t *testing.T, ns, service string, want []string) {
	t.Helper()
	builder, dial, backends := g.builder, g.dial, g.backends
	conn, err := grpc.NewClient("kubernetes:///"+service+"."+ns+":grpc",
		grpc.WithResolvers(builder),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := map[string]int64{}
		for ip, b := range backends {
			before[ip] = b.calls.Load()
		}
		for range 30 {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := client.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
			cancel()
			if err != nil {
				t.Fatalf("call: %v", err)
			}
		}
		got := map[string]int64{}
		ok := true
		for ip, b := range backends {
			got[ip] = b.calls.Load() - before[ip]
			wanted := false
			for _, w := range want {
				wanted = wanted || w == ip
			}
			if (got[ip] > 0) != wanted {
				ok = false
			}
		}
		if ok {
			t.Logf("%s: 30 calls spread as %v", service, got)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: calls reached %v, want exactly %v", service, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
