// Command deb builds leasehold's Debian package from the repository it is
// in: it builds cmd/leasehold with -trimpath and the commit linked in
// (internal/buildinfo), then packages it with the units, configuration
// and maintainer scripts of packaging/ as packaging/nfpm.yaml lists them,
// using nfpm as a library (a module of its own, so that nfpm's
// dependencies stay out of leasehold's go.mod). Run from the repository
// root:
//
//	go run -C tools/deb .                 # dist/leasehold_<version>_<arch>.deb
//	go run -C tools/deb . -arch arm64 -out /tmp
//
// The package version is leasehold's (internal/buildinfo) followed by the
// commit's date and hash, such as 0.1.0+git20261124.f51fa0d6c2a1, with
// ~dirty when the work tree has uncommitted changes (which sorts before
// the clean build of the same commit). It prints the package's path.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
)

// module is leasehold's module path, which finds the repository root.
const module = "github.com/leasehold/leasehold"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "deb:", err)
		os.Exit(1)
	}
}

func run() error {
	arch := flag.String("arch", runtime.GOARCH, "target architecture, as GOARCH names it (amd64, arm64, ...)")
	out := flag.String("out", "", "directory for the package (default: dist/ in the repository root)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", flag.Args())
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "dist")
	} else if *out, err = filepath.Abs(*out); err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	src, err := describeSource(root)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "leasehold-deb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binary := filepath.Join(tmp, "leasehold")
	// The commit and whether the tree was modified, which "leasehold
	// version" and /version report, are linked in: go build's own
	// -buildvcs stamping misses git worktrees and may be off in GOFLAGS.
	ldflags := "-s -w"
	if src.commit != "" {
		ldflags += " -X " + module + "/internal/buildinfo.linkedCommit=" + src.commit +
			" -X " + module + "/internal/buildinfo.linkedTreeState=" + src.treeState
	}
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", binary, "./cmd/leasehold")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+*arch, "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}

	vars := map[string]string{"VERSION": src.version, "ARCH": *arch, "BINARY": binary}
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(root, "packaging", "nfpm.yaml"), func(k string) string { return vars[k] })
	if err != nil {
		return fmt.Errorf("packaging/nfpm.yaml: %w", err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return err
	}
	// Files dated by the commit, so that one commit gives one package.
	info.MTime = src.time
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	info.Target = filepath.Join(*out, pkg.ConventionalFileName(info))
	f, err := os.Create(info.Target)
	if err != nil {
		return err
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(info.Target)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println(info.Target)
	return nil
}

// source describes what the package is built from.
type source struct {
	// version is the package version.
	version string
	// time is the commit's time (now, outside git).
	time time.Time
	// commit is the commit's hash, "" outside git; treeState is "clean",
	// or "dirty" when tracked files have uncommitted changes.
	commit    string
	treeState string
}

// describeSource reads leasehold's version from internal/buildinfo and
// the commit from git.
func describeSource(root string) (source, error) {
	v, err := buildinfoVersion(filepath.Join(root, "internal", "buildinfo", "buildinfo.go"))
	if err != nil {
		return source{}, err
	}
	s := source{version: v, time: time.Now().UTC().Truncate(time.Second)}
	head, err := git(root, "log", "-1", "--format=%H %ct")
	if err != nil {
		fmt.Fprintf(os.Stderr, "deb: not a git work tree (%v): version %s without a commit\n", err, v)
		return s, nil
	}
	hash, ct, _ := strings.Cut(head, " ")
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return source{}, fmt.Errorf("commit time %q: %w", ct, err)
	}
	s.commit, s.treeState = hash, "clean"
	s.time = time.Unix(sec, 0).UTC()
	s.version = fmt.Sprintf("%s+git%s.%s", v, s.time.Format("20060102"), hash[:12])
	status, err := git(root, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return source{}, err
	}
	if status != "" {
		s.version += "~dirty"
		s.treeState = "dirty"
	}
	return s, nil
}

// buildinfoVersion finds `const Version = "..."` in file.
func buildinfoVersion(file string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name != "Version" || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					return strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return "", fmt.Errorf("%s: no const Version = \"...\"", file)
}

// repoRoot walks up from the working directory to leasehold's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside leasehold's repository (no go.mod of " + module + " above the working directory)")
		}
		dir = parent
	}
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(b)), nil
}
