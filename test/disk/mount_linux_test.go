package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends (after the cleanups registered later, such as killing
// a process using it). It skips the test where mounting is impossible.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=700", size)); err != nil {
		t.Skipf("cannot mount a small filesystem for this test (mounting a tmpfs needs root, CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// growTmpfs resizes the tmpfs on dir to size bytes.
func growTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d,mode=700", size)); err != nil {
		t.Fatalf("growing the tmpfs: %v", err)
	}
}
