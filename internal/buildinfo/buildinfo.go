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

func vcs() (commit string, dirty bool) {
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
