package disk

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/server"
)

// TestQuota: at the store's quota a create is refused with the
// full-storage Status, a renewal (which does not grow the data) and a
// delete succeed, /readyz says why and /livez stays ok; the delete makes
// room at once.
func TestQuota(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, t.TempDir(), func(c *server.Config) { c.StorageQuotaBytes = 64 << 10 })
	leases := clientset(t, s.config).CoordinationV1().Leases("default")
	ctx := t.Context()
	fill := strings.Repeat("x", 8<<10)
	var refused error
	var n int
	for n = 0; n < 20; n++ {
		if _, err := leases.Create(ctx, lease(fmt.Sprintf("l%02d", n), "holder-a", fill), metav1.CreateOptions{}); err != nil {
			refused = err
			break
		}
	}
	wantNoSpace(t, fmt.Sprintf("create after %d of 8 KiB", n), refused)
	if !strings.Contains(refused.Error(), "quota is 64 KiB (--storage-quota-bytes)") {
		t.Errorf("the refusal does not name the quota: %v", refused)
	}

	// A renewal: the same holder, a new renew time.
	l, err := leases.Get(ctx, "l00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr("holder-b")
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a renewal at the quota: %v", err)
	}
	if code, body := health(t, s.config, "/readyz?verbose"); code != 500 || !strings.Contains(body, "[-]storage-space failed") {
		t.Errorf("/readyz at the quota: %d %q", code, body)
	}
	if code, body := health(t, s.config, "/livez"); code != 200 {
		t.Errorf("/livez at the quota: %d %q", code, body)
	}

	if err := leases.Delete(ctx, "l01", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("a delete at the quota: %v", err)
	}
	if _, err := leases.Create(ctx, lease("after-delete", "holder-a", fill), metav1.CreateOptions{}); err != nil {
		t.Errorf("a create after a delete made room: %v", err)
	}
	waitReady(t, s.config)
}
