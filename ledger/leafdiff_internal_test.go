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

// A stored leaf that repeats a line is found though its values, read
// last-wins, agree with the row's: a first "status refused" before the
// row's own "status authorized" reads as a refusal to a reader taking the
// first line. Lines in another order are found too; a leaf whose only
// difference is a value left out of the comparison (the token hashes of a
// row that keeps no evidence) is not.
func TestLeafDiffFindsARepeatedOrReorderedLine(t *testing.T) {
	r := &Row{ID: strings.Repeat("ab", 32), Kind: KindReceipt, Status: Authorized, ReceiptID: "sha256:00"}
	ev := &Evidence{ReceiptJWS: "a.b.c", RequestJWT: "d.e.f"}
	recomputed := rowLeaf(r, ev)
	for name, stored := range map[string]string{
		"repeated":         strings.Replace(string(recomputed), "\nrow "+r.ID+"\n", "\nrow "+r.ID+"\nstatus refused\n", 1),
		"repeated as is":   string(recomputed) + "status authorized\n",
		"reordered":        strings.Replace(string(recomputed), "status authorized\nclass unspecified\n", "class unspecified\nstatus authorized\n", 1),
		"no final newline": strings.TrimSuffix(string(recomputed), "\n"),
	} {
		if stored == string(recomputed) {
			t.Fatalf("%s: setup: the leaf is unchanged", name)
		}
		if d := leafDiff([]byte(stored), recomputed, nil); !strings.Contains(d, "the leaf's lines differ from the row's (a repeated or reordered line)") {
			t.Errorf("%s: leafDiff %q between the row's leaf and a stored leaf:\n%s", name, d, stored)
		}
	}
	// A difference in another value is named as one, and a repeated line
	// besides.
	twice := strings.Replace(string(recomputed), "status authorized\n", "status authorized\nstatus refused\n", 1)
	if d := leafDiff([]byte(twice), recomputed, nil); !strings.Contains(d, `status is "authorized" in the row store, "refused" in the leaf`) || !strings.Contains(d, "a repeated or reordered line") {
		t.Errorf("a second status line, refused: %q", d)
	}
	// Values not compared differ without a finding.
	if d := leafDiff(recomputed, rowLeaf(r, nil), evidenceLeafKeys); d != "" {
		t.Errorf("the leaf of a row whose evidence is not compared: %q", d)
	}
	// Every other reader refuses a leaf with a repeated name.
	for _, stored := range []string{twice, string(recomputed) + "status authorized\n"} {
		if f, err := ParseLeaf([]byte(stored)); err == nil {
			t.Errorf("ParseLeaf read a leaf with two status lines as status %q", f["status"])
		}
	}
}
