package tamper

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// EditBundle replaces old with new (of the same length) in the bundle at
// offset and length inside the segment file at path, in a local evidence
// directory, as anyone who can write to the directory may. The file is
// left read-only, as the directory keeps it.
func EditBundle(path string, offset, length int, old, new string) error {
	if len(old) != len(new) {
		return fmt.Errorf("%q and %q differ in length", old, new)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if offset < 0 || length < 0 || offset+length > len(b) {
		return fmt.Errorf("bundle at %d+%d is outside %s (%d bytes)", offset, length, path, len(b))
	}
	part := b[offset : offset+length]
	i := bytes.Index(part, []byte(old))
	if i < 0 {
		return fmt.Errorf("%q not in the bundle at %d+%d of %s", old, offset, length, path)
	}
	copy(part[i:], new)
	_ = os.Chmod(filepath.Dir(path), 0o700)
	_ = os.Chmod(path, 0o600)
	return os.WriteFile(path, b, 0o400)
}
