package etcdtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// BinaryEnv names the environment variable that overrides the etcd binary.
const BinaryEnv = "LEASEHOLD_ETCD_BINARY"

const (
	// module is this repository's module path, to find its root.
	module = "github.com/leasehold/leasehold"
	// serverMain is the package of the etcd server main, in the module.
	serverMain = "./test/etcd"
	// serverModule's version in go.mod names the cache directory.
	serverModule = "go.etcd.io/etcd/server/v3"
)

// binary is the etcd binary of this test binary: found, or built, once.
// (Package state, on purpose: building once per test binary is the point.)
var binary = sync.OnceValues(findBinary)

// Binary returns the path of an etcd server binary; see the package
// documentation for where it comes from.
func Binary() (string, error) { return binary() }

func findBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("etcdtest: $%s: %w", BinaryEnv, err)
		}
		return p, nil
	}
	p, buildErr := build()
	if buildErr == nil {
		return p, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		fmt.Fprintf(os.Stderr, "etcdtest: building etcd failed, using %s: %v\n", p, buildErr)
		return p, nil
	}
	return "", fmt.Errorf("etcdtest: no etcd binary (set $%s, or install etcd): %w", BinaryEnv, buildErr)
}

// build builds test/etcd into the user cache directory, unless an
// up-to-date binary is already there, and returns its path.
func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goTool, err := goCommand()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "leasehold", "etcd-"+serverVersion(filepath.Join(root, "go.mod"))+"-"+runtime.Version())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", fmt.Errorf("etcdtest: locking %s: %w", dir, err)
	}
	defer unlock()

	bin := filepath.Join(dir, "etcd")
	cmd := exec.Command(goTool, "build", "-o", bin, serverMain)
	cmd.Dir = root
	// Without VCS stamping the binary does not depend on the work tree's
	// state, so go build finds it up to date across commits; GOFLAGS
	// replaces the caller's (-race, -cover... would change the binary).
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcdtest: go build %s: %v\n%s", serverMain, err, out)
	}
	return bin, nil
}

// moduleRoot is the directory of this module's go.mod, found from the
// working directory (a test's package directory) upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("etcdtest: not inside the " + module + " module")
		}
		dir = parent
	}
}

func isModuleRoot(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == module
		}
	}
	return false
}

// goCommand finds the go command: on $PATH, or in $GOROOT (which go test
// sets for the test binary).
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("etcdtest: the go command is neither on $PATH nor in $GOROOT")
}

// serverVersion is the version of the etcd server module that go.mod
// requires, "unknown" if it cannot tell (go build still keeps the binary
// right; only the cache directory's name would not say which it is).
func serverVersion(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == serverModule {
			return f[1]
		}
	}
	return "unknown"
}
