package heapfloor

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// systemLimit is the memory the process may use, in bytes, and where the
// figure comes from: the smaller of its cgroup's memory limit and the
// machine's memory (0 where neither is known).
func systemLimit() (uint64, string) {
	var limit uint64
	from := ""
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && si.Totalram > 0 {
		limit, from = uint64(si.Totalram)*uint64(max(si.Unit, 1)), "the machine's memory"
	}
	if self, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if n, ok := cgroupLimit(self, "/sys/fs/cgroup"); ok && (limit == 0 || n < limit) {
			limit, from = n, "the cgroup's memory limit"
		}
	}
	return limit, from
}

// cgroupLimit is the smallest memory limit set on the process's cgroup
// or a cgroup above it, read from the cgroup file system mounted at
// root; self is /proc/self/cgroup. Version 2 keeps a limit in
// memory.max ("max" for none), version 1 in its memory controller's
// memory.limit_in_bytes (a page-rounded largest value for none, which is
// above any machine's memory). In a container the process's cgroup is
// the file system's root.
func cgroupLimit(self []byte, root string) (uint64, bool) {
	var limit uint64
	found := false
	for _, line := range strings.Split(string(self), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = root, "memory.max"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, file = filepath.Join(root, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			if b, err := os.ReadFile(filepath.Join(dir, p, file)); err == nil {
				n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
				if err == nil && n > 0 && (!found || n < limit) {
					limit, found = n, true
				}
			}
			if p == "/" {
				break
			}
		}
	}
	return limit, found
}
