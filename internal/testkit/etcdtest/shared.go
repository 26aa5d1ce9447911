package etcdtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// shared is the single-member etcd shared by this test binary. (Package
// state, on purpose: it outlives every test.)
var shared = sync.OnceValues(startShared)

// Shared returns a single-member etcd for the whole test binary, started on
// the first call. Tests that use it must keep to their own keys (a key
// prefix of their own) and must not stop it. It dies with the test process;
// see the package documentation.
func Shared() (*Cluster, error) { return shared() }

func startShared() (*Cluster, error) {
	base := filepath.Join(os.TempDir(), "leasehold-etcdtest-shared")
	reap(base)
	dir := filepath.Join(base, strconv.Itoa(os.Getpid()))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := StartIn(ctx, dir, Config{})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: shared etcd: %w", err)
	}
	return c, nil
}

// reap removes the data of shared etcds whose test binary is gone.
func reap(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(base, e.Name()))
	}
}
