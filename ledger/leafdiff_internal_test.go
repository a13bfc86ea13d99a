package ledger

import (
	"strings"
	"testing"
)

// A leaf's receipt, request and token hashes come from the row's evidence
// bundle, not from the row: a difference in them names the stored
// evidence, and a difference in the row's own values the row store.
func TestLeafDiffNamesWhereEachValueComesFrom(t *testing.T) {
	r := &Row{ID: "ab12", Kind: KindReceipt, Status: Authorized, ReceiptID: "sha256:00"}
	stored := rowLeaf(r, &Evidence{ReceiptJWS: "a.b.c", RequestJWT: "d.e.f"})
	edited := rowLeaf(r, &Evidence{ReceiptJWS: "a.b.c", RequestJWT: "d.e.g"})
	diff := leafDiff(stored, edited, nil)
	if !strings.Contains(diff, "request is ") || !strings.Contains(diff, "in the stored evidence") || strings.Contains(diff, "row store") {
		t.Fatalf("an edited request JWT: %s", diff)
	}
	r2 := *r
	r2.Status = Incident
	diff = leafDiff(stored, rowLeaf(&r2, &Evidence{ReceiptJWS: "a.b.c", RequestJWT: "d.e.f"}), nil)
	if !strings.Contains(diff, `status is "incident" in the row store`) {
		t.Fatalf("an edited status: %s", diff)
	}
}
