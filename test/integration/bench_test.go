package integration

import (
	"fmt"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// BenchmarkLeaseWrites measures creates and renewals (GET-free updates with
// the last resourceVersion, as leader election does) through HTTPS with
// client-go, with parallel clients.
func BenchmarkLeaseWrites(b *testing.B) {
	for _, enc := range []string{"json", "protobuf"} {
		for _, par := range []int{1, 16} {
			s := testserver.Start(b)
			var c kubernetes.Interface
			if enc == "json" {
				c = s.Client(b)
			} else {
				c = s.ProtoClient(b)
			}
			leases := c.CoordinationV1().Leases("default")
			var seq atomic.Int64
			b.Run(fmt.Sprintf("create/%s/clients=%d", enc, par), func(b *testing.B) {
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						name := fmt.Sprintf("c-%d", seq.Add(1))
						l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{
							HolderIdentity: ptr("holder"), LeaseDurationSeconds: ptr[int32](15)}}
						if _, err := leases.Create(b.Context(), l, metav1.CreateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
			b.Run(fmt.Sprintf("update/%s/clients=%d", enc, par), func(b *testing.B) {
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					l, err := leases.Create(b.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("u-%d", seq.Add(1))}}, metav1.CreateOptions{})
					if err != nil {
						b.Error(err)
						return
					}
					for i := 0; pb.Next(); i++ {
						now := metav1.NowMicro()
						l.Spec.RenewTime = &now
						l.Spec.HolderIdentity = ptr(fmt.Sprint(i))
						if l, err = leases.Update(b.Context(), l, metav1.UpdateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
			s.Stop()
		}
	}
}
