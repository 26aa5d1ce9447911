package disk

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/testkit/ports"
)

// TestDiskFull runs leasehold on a small filesystem that its own writes
// fill: the create that does not fit is refused with the full-storage
// Status, and changes nothing; reads, lists and an open watch go on;
// deletes succeed; /readyz says why, /livez stays ok; once the filesystem
// grows, creates succeed again within seconds, without a restart; and
// after SIGKILL and a restart every acknowledged write is there.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a filesystem and runs a real process")
	}
	// The default reserve (64 MiB) on a 112 MiB filesystem: about 40 MiB
	// for the store's files before writes are refused.
	const size, grown = 112 << 20, 256 << 20
	mnt := mountTmpfs(t, size)
	dataDir := filepath.Join(mnt, "leasehold")
	addr := ports.Addr(t)
	p := startProcess(t, dataDir, addr)
	c := clientset(t, p.config)
	leases := c.CoordinationV1().Leases("default")
	ctx := t.Context()
	ack := newAcked()

	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Fill: 200 KiB leases that do not compress, until one is refused.
	fill := randomAnnotation(200 << 10)
	var refused error
	var n int
	for n = 0; n < 1000; n++ {
		name := fmt.Sprintf("fill-%03d", n)
		if _, err := leases.Create(ctx, lease(name, "h0", fill), metav1.CreateOptions{}); err != nil {
			refused = err
			break
		}
		ack.put(name, "h0")
	}
	wantNoSpace(t, fmt.Sprintf("create after %d of 200 KiB", n), refused)
	if !strings.Contains(refused.Error(), "reserve") {
		t.Errorf("the refusal does not say it is the disk's reserve: %v", refused)
	}
	t.Logf("%d leases of 200 KiB fitted; then: %v", n, refused)
	if _, err := leases.Get(ctx, fmt.Sprintf("fill-%03d", n), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused create: get answered %v, want NotFound", err)
	}
	// Updates need space too while the disk is full.
	cur, err := leases.Get(ctx, "fill-001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.HolderIdentity = ptr("h1")
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	wantNoSpace(t, "update on a full disk", err)

	// Reads go on: get, list (whole and paginated).
	if list, err := leases.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != n {
		t.Errorf("list on a full disk: %d items, %v; want %d", len(list.Items), err, n)
	}
	if page, err := leases.List(ctx, metav1.ListOptions{Limit: 5}); err != nil || len(page.Items) != 5 || page.Continue == "" {
		t.Errorf("paginated list on a full disk: %d items, %v", len(page.Items), err)
	}
	if code, body := health(t, p.config, "/readyz"); code != 500 || !strings.Contains(body, "[-]storage-space failed") {
		t.Errorf("/readyz on a full disk: %d %q", code, body)
	}
	if code, body := health(t, p.config, "/livez"); code != 200 {
		t.Errorf("/livez on a full disk: %d %q", code, body)
	}

	// A delete succeeds, and the open watch sees it.
	if err := leases.Delete(ctx, "fill-000", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	ack.del("fill-000")
	waitEvent(t, w, watch.Deleted, "fill-000")

	// The filesystem grows: creates succeed again, without a restart.
	growTmpfs(t, mnt, grown)
	start := time.Now()
	for {
		_, err := leases.Create(ctx, lease("after-growth", "h2", ""), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no create succeeded within 10 s of the filesystem growing: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ack.put("after-growth", "h2")
	t.Logf("a create succeeded %v after the filesystem grew", time.Since(start).Round(time.Millisecond))
	waitEvent(t, w, watch.Added, "after-growth")
	waitReady(t, p.config)
	if logs := strings.Count(p.log.String(), "storage full"); logs != 1 {
		t.Errorf("%d log lines say the storage is full, want 1:\n%s", logs, p.log)
	}

	// SIGKILL, restart: everything acknowledged is there.
	p.kill()
	p = startProcess(t, dataDir, addr)
	ack.check(t, clientset(t, p.config))
}
