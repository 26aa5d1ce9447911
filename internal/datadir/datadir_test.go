package datadir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil {
		t.Fatal(err)
	}
	// flock conflicts between open files, even in one process.
	_, err = Acquire(dir)
	want := fmt.Sprintf("%s is in use by another leasehold (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second Acquire: %v, want %q", err, want)
	}
	after, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil || string(after) != string(before) {
		t.Fatalf("the refused Acquire changed the lock file: %q -> %q (%v)", before, after, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	defer l.Release()
	if b, _ := os.ReadFile(filepath.Join(dir, lockName)); strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("lock file holds %q, want the pid", b)
	}
}
