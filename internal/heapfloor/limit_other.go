//go:build !linux

package heapfloor

// systemLimit is the memory the process may use: not known here.
func systemLimit() (uint64, string) { return 0, "" }
