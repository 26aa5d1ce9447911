package deptest

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leasehold/leasehold/"

// root is the repository, from this package's directory.
const root = "../../.."

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// rule forbids packages under from to import packages under to, directly
// or, when transitive, through any path.
type rule struct {
	from, to   string
	transitive bool
	why        string
}

var rules = []rule{
	{"internal/httpserver", "internal/watchcache", false, "the registry owns reads and watches end to end"},
	{"internal/httpserver", "internal/storage", false, "HTTP knows the registry, not the store"},
	{"internal/resources", "internal/registry", true, "a kind's description knows no verbs"},
	{"internal/resources", "internal/watchcache", true, "a kind's description knows no cache"},
	{"internal/resources", "internal/storage", true, "a kind's description knows no store"},
	{"internal/resources", "internal/codec", true, "the codec is derived from the descriptions, not the reverse"},
	{"internal/codec", "internal/registry", true, "encoding knows no verbs"},
	{"internal/codec", "internal/watchcache", true, "encoding knows no cache"},
	{"internal/watchcache", "internal/registry", true, "the cache is below the registry"},
	{"internal/admission", "internal/registry", true, "admission reads through the Reader it is given"},
	{"internal/controllers", "internal/watchcache", false, "controllers use the registry as any client would"},
	{"internal/controllers", "internal/storage", false, "controllers use the registry as any client would"},
	{"internal/controllers", "internal/httpserver", true, "controllers run beside the registry, not over HTTP"},
	{"internal/storage", "internal/registry", true, "storage is the bottom layer"},
	{"internal/storage", "internal/watchcache", true, "storage is the bottom layer"},
	{"internal/registry", "internal/httpserver", true, "the registry knows no HTTP"},
	{"internal/registry", "net/http", false, "the registry knows no HTTP: deadlines and connections are the transport's and httpserver's (deadline.go)"},
	{"internal/registry", "internal/h2server", true, "the registry knows no HTTP"},
	{"internal/registry", "internal/transport", true, "the registry knows no HTTP"},
	{"internal/httpserver", "internal/h2server", false, "httpserver reaches connections through http.ResponseController only, whatever serves them"},
	{"internal/registry", "internal/storage/embedded", true, "only internal/server chooses an engine"},
	{"internal/registry", "internal/storage/etcd", true, "only internal/server chooses an engine"},
	{"internal/httpserver", "internal/storage/embedded", true, "only internal/server chooses an engine"},
	{"internal/httpserver", "internal/storage/etcd", true, "only internal/server chooses an engine"},
}

func TestImports(t *testing.T) {
	pkgs := list(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		for _, r := range rules {
			if !under(name, r.from) {
				continue
			}
			imports := p.Imports
			if r.transitive {
				imports = p.Deps
			}
			for _, imp := range imports {
				if under(strings.TrimPrefix(imp, module), r.to) {
					t.Errorf("%s imports %s: %s", name, strings.TrimPrefix(imp, module), r.why)
				}
			}
		}
		// Test helpers stay out of what ships.
		if !under(name, "internal/testkit") && !under(name, "test") {
			for _, imp := range p.Deps {
				if under(strings.TrimPrefix(imp, module), "internal/testkit") {
					t.Errorf("%s imports %s: internal/testkit is for tests only", name, strings.TrimPrefix(imp, module))
				}
			}
		}
		// Nothing but the command imports the command line (and
		// test/perf/initrss, which links what the command links only to
		// measure its packages' initialisation).
		if name != "cmd/leasehold" && name != "test/perf/initrss" && slices.Contains(p.Imports, module+"internal/cli") {
			t.Errorf("%s imports internal/cli: only cmd/leasehold may", name)
		}
		// From k8s.io/apiserver, only the audit types, their codec and
		// their validation (STYLE.md: no apiserver machinery).
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "k8s.io/apiserver/") && !under(imp, "k8s.io/apiserver/pkg/apis/audit") {
				t.Errorf("%s imports %s: take only types from k8s.io/apiserver (pkg/apis/audit)", name, imp)
			}
		}
	}
}

// TestRulesBite: each rule's packages exist, so that a rule cannot pass
// because a package was renamed.
func TestRulesBite(t *testing.T) {
	pkgs := list(t)
	exists := func(prefix string) bool {
		return slices.ContainsFunc(pkgs, func(p pkg) bool { return under(strings.TrimPrefix(p.ImportPath, module), prefix) })
	}
	std := func(path string) bool {
		return slices.ContainsFunc(pkgs, func(p pkg) bool { return slices.Contains(p.Deps, path) })
	}
	for _, r := range rules {
		to := exists(r.to)
		if !strings.HasPrefix(r.to, "internal/") {
			to = std(r.to) // a package outside the module
		}
		if !exists(r.from) || !to {
			t.Errorf("rule %s -> %s names a package that does not exist", r.from, r.to)
		}
	}
}

// under reports whether package name is prefix or below it.
func under(name, prefix string) bool {
	return name == prefix || strings.HasPrefix(name, prefix+"/")
}

func list(t *testing.T) []pkg {
	t.Helper()
	// go test caches a result by the files the test itself opens, and go
	// list's reads are not among them: statting every Go file makes a
	// changed import run the test again.
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", module+"...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
