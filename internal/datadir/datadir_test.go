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

func TestBusy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := Busy(dir); err != nil {
		t.Fatalf("Busy on a missing directory: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Busy created %s", dir)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s is in use by another leasehold (pid %d)", dir, os.Getpid())
	if err := Busy(dir); err == nil || err.Error() != want {
		t.Fatalf("Busy on a held directory: %v, want %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := Busy(dir); err != nil {
		t.Fatalf("Busy after Release: %v", err)
	}
	// Busy's shared lock is gone with it: a server can take the directory.
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Busy: %v", err)
	}
	l.Release()
}
