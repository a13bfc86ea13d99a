package bolt

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// idKeyByText is idKey as the check and the decoding of the standard
// library make it, for comparison.
func idKeyByText(id string) []byte {
	if isHexID(id) {
		k, _ := hex.DecodeString(id)
		return k
	}
	if len(id)+1 == 32 {
		return append(append([]byte{textMark32}, id...), 0)
	}
	return append([]byte{textMark}, id...)
}

var sampleIDs = []string{
	strings.Repeat("0f", 32), strings.Repeat("a9", 32), strings.Repeat("AB", 32), strings.Repeat("ab", 31) + "aG", strings.Repeat("ab", 31) + "ag", "g" + strings.Repeat("0", 63),
	strings.Repeat("ab", 31) + "a/", strings.Repeat("ab", 31) + "a:", strings.Repeat("ab", 31) + "a`",
	strings.Repeat("a", 63), strings.Repeat("a", 65), strings.Repeat("x", 31), "", "row-1",
}

// TestIDKey: an id's key is its 32 bytes exactly when it is a lowercase
// hex SHA-256, and its marked text otherwise.
func TestIDKey(t *testing.T) {
	for _, id := range sampleIDs {
		if got, want := idKey(id), idKeyByText(id); !bytes.Equal(got, want) {
			t.Errorf("idKey(%q) = %x, want %x", id, got, want)
		}
	}
}

func FuzzIDKey(f *testing.F) {
	for _, id := range sampleIDs {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := idKey(id), idKeyByText(id); !bytes.Equal(got, want) {
			t.Fatalf("idKey(%q) = %x, want %x", id, got, want)
		}
	})
}
