// Package deb builds leasehold's Debian package with the repository's one
// command (go run -C tools/deb .) and inspects it: its control data and
// files with their modes, the maintainer scripts' syntax and systemd
// steps, what purge leaves of enabled units, the binary's version, the
// systemd units under systemd-analyze verify, and the configuration files
// it ships, by serving with them.
package deb

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
)

// pkg is the package built once for every test of this file.
var pkg struct {
	once sync.Once
	path string // the .deb
	root string // its files, extracted
	err  error
}

// build builds and extracts the package, or skips the test when a tool
// it needs is missing.
func build(t *testing.T) (deb, root string) {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian's dpkg and git packages), so the package cannot be built and inspected here", tool)
		}
	}
	pkg.once.Do(func() {
		// Not t.TempDir: the package outlives the first test using it.
		dir, err := os.MkdirTemp("", "leasehold-deb-test")
		if err != nil {
			pkg.err = err
			return
		}
		repo, err := filepath.Abs("../..")
		if err != nil {
			pkg.err = err
			return
		}
		cmd := exec.Command("go", "run", "-C", filepath.Join(repo, "tools", "deb"), ".", "-out", dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			pkg.err = fmt.Errorf("building the package: %v\n%s", err, stderr.String())
			return
		}
		pkg.path = strings.TrimSpace(string(out))
		pkg.root = filepath.Join(dir, "root")
		if out, err := exec.Command("dpkg-deb", "-x", pkg.path, pkg.root).CombinedOutput(); err != nil {
			pkg.err = fmt.Errorf("dpkg-deb -x: %v\n%s", err, out)
		}
	})
	if pkg.err != nil {
		t.Fatal(pkg.err)
	}
	return pkg.path, pkg.root
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pkg.path != "" {
		os.RemoveAll(filepath.Dir(pkg.path))
	}
	os.Exit(code)
}

func dpkgDeb(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestContents checks the control data, the files and their modes, the
// conffile and the maintainer scripts.
func TestContents(t *testing.T) {
	deb, _ := build(t)
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(head))

	control := dpkgDeb(t, "--field", deb, "Package", "Version", "Architecture", "Depends")
	for _, want := range []string{
		"Package: leasehold\n",
		"Version: 0.1.0+git", // then the commit's date and hash
		"." + commit[:12],
		"Depends: adduser\n",
	} {
		if !strings.Contains(control, want) {
			t.Errorf("control lacks %q:\n%s", want, control)
		}
	}

	// dpkg-deb -c lists "mode owner/group size date time ./path".
	modes := map[string]string{}
	for _, line := range strings.Split(dpkgDeb(t, "-c", deb), "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			modes[strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")] = f[0] + " " + f[1]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/leasehold":                         "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/leasehold.service":  "-rw-r--r-- root/root",
		"/usr/lib/systemd/system/leasehold@.service": "-rw-r--r-- root/root",
		"/etc/leasehold":                             "drwxr-x--- root/root",
		"/etc/leasehold/config.yaml":                 "-rw-r----- root/root",
		"/usr/share/leasehold/replica.yaml":          "-rw-r--r-- root/root",
		"/usr/share/doc/leasehold/README.md":         "-rw-r--r-- root/root",
		"/usr/share/doc/leasehold/docs/install.md":   "-rw-r--r-- root/root",
		"/usr/share/doc/leasehold/docs/ui.png":       "-rw-r--r-- root/root",
	} {
		if got := modes[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}

	ctl := t.TempDir()
	dpkgDeb(t, "--control", deb, ctl)
	if b, err := os.ReadFile(filepath.Join(ctl, "conffiles")); err != nil || strings.TrimSpace(string(b)) != "/etc/leasehold/config.yaml" {
		t.Errorf("conffiles: %q, %v", b, err)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join(ctl, script)
		if st, err := os.Stat(path); err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: %v, not executable", script, err)
			continue
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", script, err, out)
		}
	}
	// The systemd steps dh_installsystemd --no-enable writes (debhelper's
	// autoscripts postinst-systemd-dont-enable, prerm-systemd and
	// postrm-systemd), each behind a check that deb-systemd-helper is
	// there, and nothing started or reloaded under another root.
	for script, wants := range map[string][]string{
		"postinst": {
			"adduser --quiet --system --group", "install -d -o leasehold -g leasehold -m 0700 /var/lib/leasehold",
			"configure | abort-upgrade | abort-deconfigure | abort-remove)",
			"if command -v deb-systemd-helper >/dev/null 2>&1; then",
			"if deb-systemd-helper debian-installed leasehold.service; then",
			"deb-systemd-helper unmask leasehold.service >/dev/null || true",
			"if deb-systemd-helper --quiet was-enabled leasehold.service; then",
			"deb-systemd-helper enable leasehold.service >/dev/null || true",
			"deb-systemd-helper update-state leasehold.service >/dev/null || true",
			`if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then`,
		},
		"prerm": {`if [ -z "${DPKG_ROOT:-}" ] && [ "$1" = remove ] && [ -d /run/systemd/system ]; then`},
		"postrm": {
			"remove)\n\t# As debhelper's autoscripts/postrm-systemd",
			"deb-systemd-helper mask leasehold.service >/dev/null || true",
			"purge)\n\t# As debhelper's autoscripts/postrm-systemd",
			"deb-systemd-helper purge leasehold.service >/dev/null || true",
			"deb-systemd-helper unmask leasehold.service >/dev/null || true",
			`"$root"/etc/systemd/system/*.wants/leasehold@*.service`,
			`rm -rf "$root/var/lib/leasehold"`,
		},
	} {
		b, err := os.ReadFile(filepath.Join(ctl, script))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", script, want)
			}
		}
	}
}

// TestPurgeRemovesUnitLinks: after an administrator enabled
// leasehold.service and a replica leasehold@r1.service with systemctl,
// postrm remove then purge leave no link to either unit, and no state of
// deb-systemd-helper's, with deb-systemd-helper as debhelper's scripts
// use it and without it (the scripts' fallback). It works on a root of
// its own, as dpkg --root does (DPKG_ROOT), with the package's files in
// it; postinst runs as abort-upgrade, which takes its systemd steps
// only (configure would add a user to this machine).
func TestPurgeRemovesUnitLinks(t *testing.T) {
	deb, root := build(t)
	for _, tool := range []string{"systemctl", "deb-systemd-helper"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian's systemd and init-system-helpers packages), so the maintainer scripts cannot be run here", tool)
		}
	}
	ctl := t.TempDir()
	dpkgDeb(t, "--control", deb, ctl)
	// The scripts run as root on this machine: refuse a postrm that
	// would purge outside DPKG_ROOT.
	if b, err := os.ReadFile(filepath.Join(ctl, "postrm")); err != nil || !bytes.Contains(b, []byte(`root="${DPKG_ROOT:-}"`)) ||
		regexp.MustCompile(`rm -rf /|rm -rf "/`).Match(b) {
		t.Fatalf("postrm does not keep to DPKG_ROOT (%v): not run", err)
	}
	for _, tc := range []struct {
		name string
		// helper: whether deb-systemd-helper is on the scripts' PATH.
		helper bool
	}{{"deb-systemd-helper", true}, {"without deb-systemd-helper", false}} {
		t.Run(tc.name, func(t *testing.T) {
			sysroot := t.TempDir()
			if out, err := exec.Command("cp", "-a", root+"/.", sysroot).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
			path := os.Getenv("PATH")
			if !tc.helper {
				// Only what the scripts run besides deb-systemd-helper.
				path = t.TempDir()
				for _, tool := range []string{"rm", "rmdir"} {
					p, err := exec.LookPath(tool)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(p, filepath.Join(path, tool)); err != nil {
						t.Fatal(err)
					}
				}
			}
			script := func(name string, args ...string) {
				t.Helper()
				cmd := exec.Command("/bin/sh", append([]string{filepath.Join(ctl, name)}, args...)...)
				cmd.Env = []string{"PATH=" + path, "DPKG_ROOT=" + sysroot, "DPKG_MAINTSCRIPT_PACKAGE=leasehold",
					"DPKG_MAINTSCRIPT_NAME=" + name}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", name, args, err, out)
				}
			}
			script("postinst", "abort-upgrade", "0.1.0")
			if out, err := exec.Command("systemctl", "--root="+sysroot, "enable", "leasehold.service", "leasehold@r1.service").CombinedOutput(); err != nil {
				t.Fatalf("systemctl enable: %v\n%s", err, out)
			}
			links := unitLinks(t, sysroot)
			for _, want := range []string{
				"/etc/systemd/system/multi-user.target.wants/leasehold.service",
				"/etc/systemd/system/multi-user.target.wants/leasehold@r1.service",
			} {
				if !slices.Contains(links, want) {
					t.Fatalf("after systemctl enable: %v, want %s", links, want)
				}
			}
			// postinst recorded the links for purge (update-state).
			if state := "/var/lib/systemd/deb-systemd-helper-enabled/leasehold.service.dsh-also"; tc.helper != slices.Contains(links, state) {
				t.Errorf("after postinst with deb-systemd-helper %t: %v", tc.helper, links)
			}
			if err := os.MkdirAll(filepath.Join(sysroot, "var/lib/leasehold/default"), 0o700); err != nil {
				t.Fatal(err)
			}
			script("prerm", "remove")
			script("postrm", "remove")
			script("postrm", "purge")
			if links := unitLinks(t, sysroot); len(links) > 0 {
				t.Errorf("after purge: %v", links)
			}
			if _, err := os.Stat(filepath.Join(sysroot, "var/lib/leasehold")); !os.IsNotExist(err) {
				t.Errorf("after purge /var/lib/leasehold is there: %v", err)
			}
		})
	}
}

// unitLinks lists the symbolic links under root's /etc/systemd that name
// a leasehold unit (enabling or masking it), and deb-systemd-helper's
// state files for one.
func unitLinks(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	for _, dir := range []string{"etc/systemd", "var/lib/systemd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasPrefix(d.Name(), "leasehold") && (d.Type()&os.ModeSymlink != 0 || dir == "var/lib/systemd") {
				found = append(found, strings.TrimPrefix(p, root))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// TestVersion: the packaged binary says which commit it was built from.
func TestVersion(t *testing.T) {
	_, root := build(t)
	out, err := exec.Command(filepath.Join(root, "usr/bin/leasehold"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("leasehold version: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "commit " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("version %q does not name %q", out, want)
	}
	// -trimpath: no path of the build machine in the binary.
	b, err := os.ReadFile(filepath.Join(root, "usr/bin/leasehold"))
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("../..")
	if bytes.Contains(b, []byte(repo+"/internal")) {
		t.Errorf("the binary contains the build path %s: not built with -trimpath", repo)
	}
}

// TestUnits runs systemd-analyze verify on both units, as installed, with
// the host's own units around them (for the targets they name), and
// requires silence: verify exits 0 on unknown keys and bad values, with a
// warning.
func TestUnits(t *testing.T) {
	_, root := build(t)
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package), so the units cannot be verified here")
	}
	if _, err := os.Stat("/usr/lib/systemd/system/multi-user.target"); err != nil {
		t.Skip("no systemd units on this machine for the package's units to refer to (/usr/lib/systemd/system/multi-user.target)")
	}
	// A root of our own: the package's files and the host's units.
	sysroot := t.TempDir()
	if out, err := exec.Command("cp", "-a", root+"/.", sysroot).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", "-an", "/usr/lib/systemd/system/.", filepath.Join(sysroot, "usr/lib/systemd/system")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	for _, unit := range []string{"leasehold.service", "leasehold@r0.service"} {
		t.Run(unit, func(t *testing.T) {
			out, err := exec.Command("systemd-analyze", "verify", "--root="+sysroot, unit).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
		})
	}
	// Whatever else a unit file says, these must be there.
	for _, name := range []string{"leasehold.service", "leasehold@.service"} {
		b, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Type=notify", "Restart=on-failure", "TimeoutStopSec=40s", "ProtectSystem=strict",
			"ReadWritePaths=/var/lib/leasehold\n", "NoNewPrivileges=yes", "PrivateTmp=yes",
			"CapabilityBoundingSet=\n", "User=leasehold",
		} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
}

// TestConfigFiles serves with each configuration file the package ships,
// as its unit would (serve --config FILE), with only the paths and
// addresses of this test given on the command line.
func TestConfigFiles(t *testing.T) {
	_, root := build(t)
	bin := filepath.Join(root, "usr/bin/leasehold")
	t.Run("config.yaml", func(t *testing.T) {
		serveUntilReady(t, bin, "--config", filepath.Join(root, "etc/leasehold/config.yaml"),
			"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	})
	t.Run("replica.yaml", func(t *testing.T) {
		etcd := etcdtest.Start(t, etcdtest.Config{})
		serveUntilReady(t, bin, "--config", filepath.Join(root, "usr/share/leasehold/replica.yaml"),
			"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--etcd-servers", strings.Join(etcd.Endpoints(), ","))
	})
}

// serveUntilReady runs leasehold serve with args until it says it serves,
// then stops it with SIGTERM, as systemd would, and wants exit status 0.
func serveUntilReady(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, args...)...)
	log := &watchedLog{pattern: regexp.MustCompile(`leasehold is serving.* url=https://127\.0\.0\.1:\d+`), seen: make(chan struct{})}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-log.seen:
	case err := <-exited:
		t.Fatalf("leasehold serve %v ended before serving: %v\n%s", args, err, log)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("leasehold serve after SIGTERM: %v\n%s", err, log)
	}
}

// watchedLog keeps what a process logs and closes seen once a line
// matches pattern.
type watchedLog struct {
	pattern *regexp.Regexp
	seen    chan struct{}

	mu   sync.Mutex // guards buf and once
	buf  bytes.Buffer
	once bool
}

func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.once && w.pattern.Match(w.buf.Bytes()) {
		w.once = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
