package integration

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// fillLeases creates n leases in default, shaped like leader-election
// leases, with parallel clients.
func fillLeases(b testing.TB, s *testserver.Server, n int) {
	b.Helper()
	c := s.ProtoClient(b)
	var wg sync.WaitGroup
	const workers = 32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				now := metav1.NowMicro()
				l := &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lease-%06d", i), Labels: map[string]string{"app": "bench"}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(fmt.Sprintf("holder-%d", i)), LeaseDurationSeconds: ptr[int32](15),
						AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr[int32](1)},
				}
				if _, err := c.CoordinationV1().Leases("default").Create(b.Context(), l, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkList lists 20,000 leases through HTTPS, whole and in pages of
// 500, in JSON and protobuf, plain and gzipped (what client-go asks for by
// default); the client only reads the bytes, so the time and allocations
// are the server's.
func BenchmarkList(b *testing.B) {
	s := testserver.Start(b)
	fillLeases(b, s, 20000)
	hc := rawClient(b, s)
	get := func(b *testing.B, query, accept, encoding string) (n int64, cont string) {
		req, _ := http.NewRequestWithContext(b.Context(), "GET", s.URL()+"/apis/coordination.k8s.io/v1/namespaces/default/leases"+query, nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		if accept == "application/json" && query != "" {
			// Find the continue token without decoding the whole body.
			data, _ := io.ReadAll(resp.Body)
			return int64(len(data)), continueOf(data)
		}
		n, _ = io.Copy(io.Discard, resp.Body)
		return n, ""
	}
	for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		for _, encoding := range []string{"identity", "gzip"} {
			b.Run("full/"+accept+"/"+encoding, func(b *testing.B) {
				b.ReportAllocs()
				var size int64
				for b.Loop() {
					size, _ = get(b, "", accept, encoding)
				}
				b.ReportMetric(float64(size)/(1<<20), "MiB/list")
			})
		}
	}
	b.Run("pages-of-500/application/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cont, pages := "", 0
			for {
				q := "?limit=500"
				if cont != "" {
					q += "&continue=" + cont
				}
				_, cont = get(b, q, "application/json", "identity")
				pages++
				if cont == "" {
					break
				}
			}
			if pages != 40 {
				b.Fatalf("%d pages", pages)
			}
		}
	})
}

// continueOf extracts metadata.continue from a JSON list.
func continueOf(data []byte) string {
	const key = `"continue":"`
	i := indexOf(string(data[:min(len(data), 512)]), key)
	if i < 0 {
		return ""
	}
	rest := data[i+len(key):]
	j := indexOf(string(rest), `"`)
	return string(rest[:j])
}
