// Package fsync makes changes to a directory durable.
package fsync

import "os"

// Dir syncs directory dir, so that a file created, renamed or removed in
// it survives a crash.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
