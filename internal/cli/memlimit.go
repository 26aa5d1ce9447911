package cli

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// memoryLimitShare is the share of the memory available to the process
// that the Go runtime's soft limit is set to when GOMEMLIMIT is unset: the
// rest is for what the runtime does not count (stacks of threads outside
// Go, the kernel's page tables, fragmentation).
const memoryLimitShare = 0.9

// gcHeadroom is how much the heap may grow between garbage collections
// at least (package gcpace): under a stream of small writes to a few
// thousand objects, a collection per 64 MiB allocated instead of one per
// live heap's worth (~35 MB there) saves a tenth of the server's CPU, for
// at most 64 MiB more memory, and nothing once the live heap is larger.
const gcHeadroom = 64 << 20

// quietInterval is how long a server goes without a garbage collection
// before the freed heap that headroom keeps is returned to the OS.
const quietInterval = 30 * time.Second

// setMemoryLimit gives the Go runtime a soft memory limit when GOMEMLIMIT
// is not set (an explicit GOMEMLIMIT, "off" included, is honoured by the
// runtime itself): memoryLimitShare of the process's cgroup memory limit,
// or of the machine's memory when there is none. Near the limit the
// garbage collector runs more often instead of letting the heap grow into
// an OOM kill; it does not cap the memory, which the server bounds
// otherwise (in-flight limits, the store's quota; see docs/reliability.md).
func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Debug("Go memory limit from GOMEMLIMIT", "limit", os.Getenv("GOMEMLIMIT"))
		return
	}
	available, source := availableMemory("/")
	if available <= 0 {
		log.Debug("no memory limit found; the Go runtime has none")
		return
	}
	limit := int64(float64(available) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set (GOMEMLIMIT chooses another)", "limit_bytes", limit, "of", source, "available_bytes", available)
}

// availableMemory returns the memory the process may use, from the files
// under root ("/" but in tests): the smallest cgroup memory limit of its
// cgroup and the cgroup's ancestors (v2 or v1), else the machine's memory;
// 0 when neither is known. source says which.
func availableMemory(root string) (bytes int64, source string) {
	if n := cgroupLimit(root); n > 0 {
		return n, "cgroup"
	}
	if n := memTotal(root); n > 0 {
		return n, "machine"
	}
	return 0, ""
}

// unlimited is above any real memory limit: cgroup v1 says "no limit"
// with a number near 2^63.
const unlimited = 1 << 60

// cgroupLimit returns the smallest memory limit of the process's cgroup
// and its ancestors, 0 when there is none.
func cgroupLimit(root string) int64 {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var best int64
	consider := func(path string) {
		raw, err := os.ReadFile(path)
		if err != nil {
			return
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || n <= 0 || n >= unlimited { // v2 says "max"
			return
		}
		if best == 0 || n < best {
			best = n
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = filepath.Join(root, "sys/fs/cgroup"), "memory.max"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, file = filepath.Join(root, "sys/fs/cgroup/memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		// The cgroup's own limit and its ancestors'. Inside a container
		// the path may not exist under its own /sys/fs/cgroup, whose root
		// is then the container's cgroup: that is considered too.
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			consider(filepath.Join(dir, p, file))
			if p == "/" {
				break
			}
		}
	}
	return best
}

// memTotal returns the machine's memory from /proc/meminfo, 0 if unknown.
func memTotal(root string) int64 {
	data, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
