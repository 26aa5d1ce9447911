// Package datadir guards a server's data directory: one leasehold at a
// time may use it. The lock is taken before anything in the directory is
// read or written (certificates, admin.kubeconfig, the store), so a second
// server started on a directory in use changes nothing and says who holds
// it.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file inside the data directory. It holds the pid
// of the server that has the lock, for the error message of the next one.
const lockName = "leasehold.lock"

// Lock is a held data directory.
type Lock struct {
	f *os.File
}

// Acquire creates dir if needed and takes its lock, without waiting. When
// another process holds it, the error names that process.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	// flock locks belong to the open file: they go with the process,
	// however it ends, so a killed server leaves no stale lock.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another leasehold%s", dir, holder(f))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Busy returns an error naming the process that holds dir's lock, or nil
// when no leasehold runs on dir (or dir does not exist). Unlike Acquire,
// it creates and writes nothing: restore asks it before refusing a
// directory that must stay as it is.
func Busy(dir string) error {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close() // releases the shared lock below
	// Shared: it conflicts with a server's exclusive lock only.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is in use by another leasehold%s", dir, holder(f))
		}
		return fmt.Errorf("checking the lock of %s: %w", dir, err)
	}
	return nil
}

// holder describes the process named in a held lock file, "" when unknown.
func holder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", pid)
}

// Release gives the directory up. The lock file stays, unlocked.
func (l *Lock) Release() error {
	return l.f.Close()
}
