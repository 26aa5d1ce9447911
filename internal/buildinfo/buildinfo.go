// Package buildinfo says which leasehold this is and which Kubernetes API
// it speaks.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/version"
)

// Version is leasehold's own version.
const Version = "0.1.0"

// Kubernetes API version served (the k8s.io/api types compiled in).
const (
	kubeMajor = "1"
	kubeMinor = "37"
)

// KubeVersion is the /version answer: the Kubernetes version whose API
// leasehold serves, with leasehold's own version as build metadata so that
// clients see a normal Kubernetes version.
func KubeVersion() version.Info {
	commit, dirty := vcs()
	state := "clean"
	if dirty {
		state = "dirty"
	}
	return version.Info{
		Major:                 kubeMajor,
		Minor:                 kubeMinor,
		EmulationMajor:        kubeMajor,
		EmulationMinor:        kubeMinor,
		MinCompatibilityMajor: kubeMajor,
		MinCompatibilityMinor: "36",
		GitVersion:            "v" + kubeMajor + "." + kubeMinor + ".0+leasehold-" + Version,
		GitCommit:             commit,
		GitTreeState:          state,
		BuildDate:             "",
		GoVersion:             runtime.Version(),
		Compiler:              runtime.Compiler,
		Platform:              runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// The commit and tree state of the source, set by the linker when the
// build says so (tools/deb: -ldflags "-X ...linkedCommit=HASH -X
// ...linkedTreeState=clean"). go build stamps them itself with -buildvcs,
// but not in a git worktree (cmd/go takes only a .git directory for a
// repository, and a worktree has a .git file) nor when GOFLAGS turns it
// off; the linked values win when set.
var (
	linkedCommit    string
	linkedTreeState string // "clean" or "dirty"
)

func vcs() (commit string, dirty bool) {
	if linkedCommit != "" {
		return linkedCommit, linkedTreeState == "dirty"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return commit, dirty
}
