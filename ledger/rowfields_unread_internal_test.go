package ledger

import (
	"strings"
	"testing"
)

// Evidence that hashes to its write-time hash but whose tokens no longer
// read (a version that read them more leniently wrote it) is not called
// an edit of the row: it is as written.
func TestUnreadableEvidenceAsWrittenIsNotCalledAnEdit(t *testing.T) {
	r := &Row{ID: strings.Repeat("a", 64), Kind: KindReceipt}
	diffs := editedFields(t.Context(), r, &Evidence{ReceiptJWS: "not.a.token!"}, "", nil)
	if len(diffs) != 1 || strings.Contains(diffs[0], editedRow) || !strings.Contains(diffs[0], "shows no edit") {
		t.Fatalf("differences: %q; want one that says the evidence is as written, not that the row was edited", diffs)
	}
}
