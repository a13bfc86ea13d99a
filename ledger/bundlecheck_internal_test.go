package ledger

import (
	"bytes"
	"errors"
	"testing"
)

// The uploader checks every bundle against its write-time hash before
// its put, a bundle a row: the check allocates nothing when the bundle
// is as written, and an edited one is errEdited.
func TestABundleIsCheckedWithoutAnAllocation(t *testing.T) {
	b := bytes.Repeat([]byte(`{"receipt":"x"}`), 110)
	e := OutboxEntry{Kind: ObjectEvidence, Ref: "row", SHA256: sha256Hex(b)}
	if n := testing.AllocsPerRun(100, func() {
		if err := bundleAsWritten(nil, e, b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations a check, want 0", n)
	}
	edited := bytes.Clone(b)
	edited[3] = 'R'
	if err := bundleAsWritten(nil, e, edited); !errors.Is(err, errEdited) {
		t.Fatalf("an edited bundle: %v, want errEdited", err)
	}
}
