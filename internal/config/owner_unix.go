//go:build unix

package config

import (
	"os"
	"syscall"
)

// ownedByRoot reports whether root owns the file st describes.
func ownedByRoot(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && s.Uid == 0
}
