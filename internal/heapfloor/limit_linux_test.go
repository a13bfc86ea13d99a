package heapfloor

import (
	"os"
	"path/filepath"
	"testing"
)

// A cgroup's memory limit is the smallest set on it or above it, in
// version 2's and version 1's files, as a host's service and a
// container see them.
func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		self  string
		files map[string]string
		want  uint64 // 0: none found
	}{
		{"v2 service under a limited slice", "0::/system.slice/ledgerd.service\n",
			map[string]string{"system.slice/ledgerd.service/memory.max": "max\n", "system.slice/memory.max": "1073741824\n"}, 1 << 30},
		{"v2 service limited under a larger slice", "0::/system.slice/ledgerd.service\n",
			map[string]string{"system.slice/ledgerd.service/memory.max": "268435456\n", "system.slice/memory.max": "1073741824\n"}, 256 << 20},
		{"v2 container", "0::/\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20},
		{"v2 container seen from the host's path", "0::/docker/abc\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20},
		{"v2 without a limit", "0::/user.slice\n", map[string]string{"user.slice/memory.max": "max\n"}, 0},
		{"v1 memory controller", "12:cpu,cpuacct:/docker/abc\n9:memory:/docker/abc\n",
			map[string]string{"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n", "memory/docker/memory.limit_in_bytes": "268435456\n"}, 256 << 20},
		{"v1 without a memory controller", "12:cpu,cpuacct:/\n", map[string]string{"memory.max": "1024\n"}, 0},
		{"not cgroup lines", "garbage\n\n0:\n", map[string]string{"memory.max": "1024\n"}, 0},
		{"a value that is not a number", "0::/\n", map[string]string{"memory.max": "lots\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, v := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := cgroupLimit([]byte(tc.self), root)
			if ok != (tc.want != 0) || got != tc.want {
				t.Errorf("cgroupLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.want != 0)
			}
		})
	}
}
