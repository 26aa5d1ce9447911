package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAvailableMemory(t *testing.T) {
	const meminfo = "MemTotal:       24684084 kB\nMemFree:  1000 kB\n"
	for _, tc := range []struct {
		name       string
		files      map[string]string
		want       int64
		wantSource string
	}{
		{"nothing known", nil, 0, ""},
		{"machine only", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n"}, 24684084 << 10, "machine"},
		{"cgroup v2 without a limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/system.slice/leasehold.service\n",
			"sys/fs/cgroup/system.slice/leasehold.service/memory.max": "max\n",
		}, 24684084 << 10, "machine"},
		{"cgroup v2, the unit's limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/system.slice/leasehold.service\n",
			"sys/fs/cgroup/system.slice/leasehold.service/memory.max": "536870912\n",
			"sys/fs/cgroup/system.slice/memory.max":                   "max\n",
		}, 512 << 20, "cgroup"},
		{"cgroup v2, a parent's smaller limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "1073741824\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
		}, 256 << 20, "cgroup"},
		{"cgroup v2 inside a container: its root", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20, "cgroup"},
		{"cgroup v1 without a limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/5ba2\n0::/\n",
			"sys/fs/cgroup/memory/process_api/5ba2/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
		}, 24684084 << 10, "machine"},
		{"cgroup v1 with a limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "5:cpuacct,memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
		}, 2 << 30, "cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, source := availableMemory(root)
			if got != tc.want || source != tc.wantSource {
				t.Errorf("availableMemory = %d (%s), want %d (%s)", got, source, tc.want, tc.wantSource)
			}
		})
	}
}
