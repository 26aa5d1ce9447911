package httpserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/internal/auth"
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
		b.Run(fmt.Sprintf("holders=%d", parallelism*runtime.GOMAXPROCS(0)), func(b *testing.B) { benchRenewals(b, parallelism, nil) })
	}
}

// BenchmarkRenewalAudit is BenchmarkRenewal for an authenticated user
// (every authorization allowed, with its reason), without an audit log
// and with one recording Metadata for everything (both stages) in a
// file: the audit log's cost per renewal, the writer's included.
func BenchmarkRenewalAudit(b *testing.B) {
	user := fixedUser{Name: "bench", UID: "uid-bench", Groups: []string{"system:authenticated"}}
	withUser := func(c *Config) { c.Authenticator, c.Authorizer = user, auth.NewAuthorizer(auth.AlwaysAllow()) }
	b.Run("audit=none", func(b *testing.B) { benchRenewals(b, 16, withUser) })
	for _, c := range []struct{ name, policy string }{
		{"audit=metadata", "rules:\n- level: Metadata\n"},
		// One event a request instead of two, as production policies have it.
		{"audit=metadata,omitStages=RequestReceived", "omitStages: [RequestReceived]\nrules:\n- level: Metadata\n"},
	} {
		b.Run(c.name, func(b *testing.B) { benchAudited(b, c.policy, withUser) })
	}
}

func benchAudited(b *testing.B, rules string, withUser func(*Config)) {
	policy, _, err := audit.ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\n" + rules))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "audit.log")
	l, err := audit.New(audit.Options{Path: path, Policy: policy, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	b.Cleanup(stop)
	benchRenewals(b, 16, func(c *Config) { withUser(c); c.Audit = l })
	stop()
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(b.N), "audit-bytes/op")
	}
}

// fixedUser authenticates every request as itself.
type fixedUser auth.User

func (u fixedUser) Authenticate(*http.Request) (auth.User, bool, error) {
	return auth.User(u), true, nil
}

func benchRenewals(b *testing.B, parallelism int, mutate func(*Config)) {
	holders := parallelism * runtime.GOMAXPROCS(0)
	p := newInProcess(b, mutate)
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
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
