package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestResponseCompression: like kube-apiserver, a response body over
// 128 KiB is gzipped for a client that accepts gzip, in JSON and protobuf;
// smaller bodies, and clients that do not ask, get it plain. client-go asks
// by default (Go's transport), and decompresses transparently.
func TestResponseCompression(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	ctx := t.Context()
	leases := ts.Client(t).CoordinationV1().Leases("default")
	const n = 200 // with 1 KiB annotations, a list of about 250 KB
	pad := strings.Repeat("x", 1024)
	for i := range n {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%03d", i), Annotations: map[string]string{"pad": pad}}}
		must[*coordinationv1.Lease](t)(leases.Create(ctx, l, metav1.CreateOptions{}))
	}
	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	decode := func(t *testing.T, r rawResponse) *coordinationv1.LeaseList {
		t.Helper()
		var list coordinationv1.LeaseList
		if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(), r.body, &list); err != nil {
			t.Fatalf("decoding %d bytes: %v", len(r.body), err)
		}
		return &list
	}
	gunzip := func(t *testing.T, r rawResponse) rawResponse {
		t.Helper()
		if r.code != 200 || r.header.Get("Content-Encoding") != "gzip" || !strings.Contains(r.header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("code %d, headers %v; want a gzipped 200", r.code, r.header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) <= 128*1024 || len(r.body)*4 > len(plain) {
			t.Errorf("%d bytes gzipped to %d", len(plain), len(r.body))
		}
		r.body = plain
		return r
	}

	for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(accept, func(t *testing.T) {
			zipped := gunzip(t, do(t, ts, "GET", path, map[string]string{"Accept": accept, "Accept-Encoding": "deflate, gzip"}, ""))
			if got := decode(t, zipped); len(got.Items) != n {
				t.Errorf("gzipped list has %d items, want %d", len(got.Items), n)
			}
			plain := do(t, ts, "GET", path, map[string]string{"Accept": accept, "Accept-Encoding": "identity"}, "")
			if plain.header.Get("Content-Encoding") != "" || plain.header.Get("Content-Length") != fmt.Sprint(len(plain.body)) {
				t.Errorf("without gzip: headers %v, %d bytes", plain.header, len(plain.body))
			}
			// The same items (the list's resourceVersion may differ: on
			// the shared etcd of CI's second pass, other servers move it).
			if got, want := decode(t, plain), decode(t, zipped); !equality.Semantic.DeepEqual(got.Items, want.Items) {
				t.Error("the gzipped list differs from the plain one")
			}
			// One object is small: never compressed.
			one := do(t, ts, "GET", path+"/l000", map[string]string{"Accept": accept, "Accept-Encoding": "gzip"}, "")
			if one.code != 200 || one.header.Get("Content-Encoding") != "" {
				t.Errorf("single lease: code %d, headers %v", one.code, one.header)
			}
			// HEAD gets the headers and no body.
			head := do(t, ts, "HEAD", path, map[string]string{"Accept": accept, "Accept-Encoding": "gzip"}, "")
			if head.code != 200 || head.header.Get("Content-Encoding") != "gzip" || len(head.body) != 0 {
				t.Errorf("HEAD: code %d, headers %v, %d bytes", head.code, head.header, len(head.body))
			}
		})
	}

	// client-go as configured by default: compressed on the wire, whole
	// in the caller's hands.
	var compressed atomic.Int32
	cfg := rest.CopyConfig(ts.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.Uncompressed {
				compressed.Add(1)
			}
			return resp, err
		})
	}
	for _, content := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		cfg.ContentType = content
		c := must[*kubernetes.Clientset](t)(kubernetes.NewForConfig(cfg))
		before := compressed.Load()
		list := must[*coordinationv1.LeaseList](t)(c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{}))
		if len(list.Items) != n || list.Items[n-1].Annotations["pad"] != pad {
			t.Errorf("%s: client-go listed %d leases", content, len(list.Items))
		}
		if compressed.Load() != before+1 {
			t.Errorf("%s: the list was not gzipped on the wire", content)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
