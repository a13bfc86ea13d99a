package s3

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadObject reads objects of a given length and of none, at the
// bound and over it, and one shorter than its length.
func TestReadObject(t *testing.T) {
	for _, c := range []struct {
		name        string
		body        string
		size, limit int64
		want        string
		err         error
	}{
		{"length given", "abcdef", 6, 6, "abcdef", nil},
		{"empty", "", 0, 6, "", nil},
		{"length over the bound", "abcdefg", 7, 6, "", errTooLarge},
		{"no length, at the bound", "abcdef", -1, 6, "abcdef", nil},
		{"no length, over the bound", "abcdefg", -1, 6, "", errTooLarge},
		{"shorter than its length", "abc", 6, 6, "", io.ErrUnexpectedEOF},
	} {
		got, err := readObject(strings.NewReader(c.body), c.size, c.limit)
		if !errors.Is(err, c.err) || (err == nil && string(got) != c.want) {
			t.Errorf("%s: readObject = %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
}
