package disk

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestEtcdNoSpace: on etcd, a write refused by etcd's quota reaches the
// client as kube-apiserver words it (a 500 without a reason, etcd's
// message); reads, lists and watches go on from the cache; deletes
// succeed; /readyz says storage-space, /livez stays ok.
func TestEtcdNoSpace(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Config{Args: []string{"--quota-backend-bytes=3000000"}})
	s := startInProcess(t, t.TempDir(), testserver.Etcd(cluster.Endpoints(), "/nospace"))
	leases := clientset(t, s.config).CoordinationV1().Leases("default")
	ctx := t.Context()
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	fill := randomAnnotation(200 << 10)
	var refused error
	var n int
	for n = 0; n < 100; n++ {
		if _, err := leases.Create(ctx, lease(fmt.Sprintf("l%02d", n), "h0", fill), metav1.CreateOptions{}); err != nil {
			refused = err
			break
		}
	}
	var se *apierrors.StatusError
	if !errors.As(refused, &se) || se.ErrStatus.Code != 500 || se.ErrStatus.Reason != metav1.StatusReasonUnknown ||
		se.ErrStatus.Message != "etcdserver: mvcc: database space exceeded" {
		t.Fatalf("create after %d of 200 KiB into a 3 MB etcd quota: %v, want kube-apiserver's 500 with etcd's message", n, refused)
	}
	if _, err := leases.Get(ctx, "l00", metav1.GetOptions{}); err != nil {
		t.Errorf("get with etcd's NOSPACE alarm: %v", err)
	}
	// The create that crossed the quota may have been applied: etcd
	// applies it, then raises the alarm and answers "database space
	// exceeded".
	if list, err := leases.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != n && len(list.Items) != n+1 {
		t.Errorf("list with etcd's NOSPACE alarm: %d items, %v; want %d or %d", len(list.Items), err, n, n+1)
	}
	if code, body := health(t, s.config, "/readyz"); code != 500 || !strings.Contains(body, "[+]storage ok\n[-]storage-space failed") {
		t.Errorf("/readyz with etcd's NOSPACE alarm: %d %q", code, body)
	}
	if code, body := health(t, s.config, "/livez"); code != 200 {
		t.Errorf("/livez with etcd's NOSPACE alarm: %d %q", code, body)
	}
	if err := leases.Delete(ctx, "l00", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete with etcd's NOSPACE alarm: %v", err)
	}
	waitEvent(t, w, watch.Deleted, "l00")
}
