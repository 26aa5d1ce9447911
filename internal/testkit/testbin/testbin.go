// Package testbin builds the repository's commands for the tests that run
// them as processes (the crash, disk, multi-replica and lock tests), once
// per test binary whichever of them asks first.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
)

// Leasehold is the server's command.
const Leasehold = "github.com/leasehold/leasehold/cmd/leasehold"

// Package state, on purpose: building once per test binary is the point.
var (
	dir    = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "leasehold-testbin") })
	builds sync.Map // package path → func() (string, error)
)

// Build returns the path of the binary of the command pkg (a package path
// of this module), built on first use.
func Build(pkg string) (string, error) {
	f, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		d, err := dir()
		if err != nil {
			return "", err
		}
		bin := filepath.Join(d, path.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v: %s", pkg, err, out)
		}
		return bin, nil
	}))
	return f.(func() (string, error))()
}

// Cleanup removes what Build built; a TestMain calls it after the tests.
func Cleanup() {
	built := false
	builds.Range(func(any, any) bool { built = true; return false })
	if d, err := dir(); built && err == nil {
		os.RemoveAll(d)
	}
}
