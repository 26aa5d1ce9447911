package audit

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/auth"
)

// BenchmarkRenewalRecord: what the audit log adds to a lease renewal at
// level Metadata for everything (kube-apiserver's two events,
// RequestReceived and ResponseComplete), written to a file.
func BenchmarkRenewalRecord(b *testing.B) {
	policy, _, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(Options{Path: filepath.Join(b.TempDir(), "audit.log"), Policy: policy, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()
	const uri = "/apis/coordination.k8s.io/v1/namespaces/default/leases/lease-000112"
	req := httptest.NewRequest(http.MethodPut, uri, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("User-Agent", "leasehold-bench/1795564112496258827")
	a := &auth.Attributes{
		User: auth.User{Name: "bench", UID: "uid-bench", Groups: []string{"system:authenticated"}},
		Verb: "update", ResourceRequest: true, APIGroup: "coordination.k8s.io", APIVersion: "v1",
		Resource: "leases", Namespace: "default", Name: "lease-000112",
	}
	meta := &metav1.ObjectMeta{Namespace: "default", Name: "lease-000112", UID: "92862d12-2997-4ba7-92bb-5302f5bcc89c", ResourceVersion: "65274"}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		r := l.Begin(req, a, true, "343ef3ee-6432-4a08-8b2d-de178d46c9bf", time.Now(), false)
		r.Authorized(true, `RBAC: allowed by RoleBinding "lease-holder/default" of Role "lease-holder" to User "bench"`)
		r.RequestObject(meta, nil)
		r.ResponseStarted(http.StatusOK)
		r.ResponseObject(nil, nil)
		r.Complete()
	}
	// The writer's CPU too: everything is written once Run returns.
	stop()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
