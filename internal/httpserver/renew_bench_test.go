package httpserver

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// BenchmarkRenewal is a lease renewal through the whole server but the
// network: a protobuf PUT, as client-go's leader election sends, decoded,
// admitted, tracked, stored (group commit, fsync) and answered. It
// reports the process's CPU per renewal, the number to compare with
// kube-apiserver's (all of it the server's but the protobuf encoding of
// the request and decoding of the answer, a few µs); profile it with
// -cpuprofile. Each holder is a goroutine renewing its own lease without
// reading it: an answer's resourceVersion is the next renewal's.
func BenchmarkRenewal(b *testing.B) {
	for _, parallelism := range []int{1, 16} {
		holders := parallelism * runtime.GOMAXPROCS(0)
		b.Run(fmt.Sprintf("holders=%d", holders), func(b *testing.B) {
			p := newInProcess(b, nil)
			codec := protobuf.NewSerializer(p.reg.Codecs().Scheme(), p.reg.Codecs().Scheme())
			do := func(method, target string, l *coordinationv1.Lease, code int) error {
				var buf bytes.Buffer
				if err := codec.Encode(l, &buf); err != nil {
					return err
				}
				req := httptest.NewRequest(method, target, &buf)
				req.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
				req.Header.Set("Accept", "application/vnd.kubernetes.protobuf, */*")
				req.Header.Set("User-Agent", "bench-elector/v0.0.0 (linux/amd64) kubernetes/$Format/leader-election")
				w := httptest.NewRecorder()
				p.srv.ServeHTTP(w, req)
				if w.Code != code {
					return fmt.Errorf("%s %s: %d %s", method, target, w.Code, w.Body)
				}
				var out coordinationv1.Lease
				if _, _, err := codec.Decode(w.Body.Bytes(), nil, &out); err != nil {
					return err
				}
				l.ResourceVersion = out.ResourceVersion
				return nil
			}
			const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
			leases := make([]*coordinationv1.Lease, holders)
			for h := range leases {
				holder := fmt.Sprintf("node-%d", h)
				leases[h] = &coordinationv1.Lease{
					TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l-%d", h), Namespace: "default"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptrTo[int32](15),
						AcquireTime: &metav1.MicroTime{Time: time.Unix(1, 0)}, RenewTime: &metav1.MicroTime{Time: time.Unix(1, 0)},
						LeaseTransitions: ptrTo[int32](0)},
				}
				if err := do("POST", path, leases[h], http.StatusCreated); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(parallelism)
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := leases[next.Add(1)-1]
				for i := int64(2); pb.Next(); i++ {
					l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(i, 0)}
					if err := do("PUT", path+"/"+l.Name, l, http.StatusOK); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
		})
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
