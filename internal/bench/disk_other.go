//go:build !linux

package bench

import "os"

// fdatasync flushes f's data; where there is no fdatasync, with fsync,
// as bbolt does.
func fdatasync(f *os.File) error { return f.Sync() }
