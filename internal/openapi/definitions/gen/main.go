// Command gen regenerates package definitions from the list of served
// kinds (package builtin): it runs kube-openapi's openapi-gen on the Go
// packages of every served version's types, on the k8s.io packages those
// import (whose types the served ones reference), and on the packages of
// the meta types leasehold answers with (discovery, options, Status,
// /version). Run it with `go generate ./internal/openapi/...` after adding
// a kind; a test in internal/openapi fails until then.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/internal/resources/builtin"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	served := map[string]bool{}
	for _, k := range builtin.Kinds(builtin.Options{CoordinatedLeaderElection: true}) {
		for _, v := range k.Versions {
			served[pkgOf(v.New())] = true
			served[pkgOf(v.NewList())] = true
		}
	}
	pkgs := map[string]bool{
		pkgOf(&metav1.Status{}):        true,
		pkgOf(&runtime.RawExtension{}): true,
		pkgOf(&version.Info{}):         true,
	}
	for p := range served {
		pkgs[p] = true
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, p).Output()
		if err != nil {
			return fmt.Errorf("go list %s: %w", p, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if strings.HasPrefix(imp, "k8s.io/api/") || strings.HasPrefix(imp, "k8s.io/apimachinery/pkg/") {
				pkgs[imp] = true
			}
		}
	}
	list := make([]string, 0, len(pkgs))
	for p := range pkgs {
		list = append(list, p)
	}
	slices.Sort(list)
	args := append([]string{"tool", "openapi-gen",
		"--output-dir", ".",
		"--output-pkg", "github.com/leasehold/leasehold/internal/openapi/definitions",
		"--output-file", "zz_generated.openapi.go",
		// The API rule violations belong to k8s.io/api (kube-apiserver
		// lists them in api/api-rules/violation_exceptions.list).
		"--report-filename", os.DevNull,
	}, list...)
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func pkgOf(obj any) string { return reflect.TypeOf(obj).Elem().PkgPath() }
