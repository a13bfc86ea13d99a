package heapfloor

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// cgroupLimits are the files that hold the memory limit of the process's
// cgroup: version 2's, then version 1's (a limit of "max", or version
// 1's page-rounded largest value, is none).
var cgroupLimits = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// systemLimit is the memory the process may use, in bytes, and where the
// figure comes from: the smaller of its cgroup's limit and the machine's
// memory (0 where neither is known).
func systemLimit() (uint64, string) {
	var limit uint64
	from := ""
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && si.Totalram > 0 {
		limit, from = uint64(si.Totalram)*uint64(max(si.Unit, 1)), "the machine's memory"
	}
	for _, path := range cgroupLimits {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && (limit == 0 || n < limit) {
			limit, from = n, "the cgroup's memory limit"
		}
		break
	}
	return limit, from
}
