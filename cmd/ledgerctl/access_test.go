package main

import (
	"encoding/csv"
	"strings"
	"testing"
)

// "Who looked up this customer's rows?" through the binary: an admin lists
// the reads, as a table or CSV; other roles are refused.
func TestAccessLogThroughTheBinary(t *testing.T) {
	f := start(t)
	as := func(role string) map[string]string {
		return map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys[role]}
	}
	if code, _, errs := exe(t, as("support"), "lookup", "--principal", "acct-48213"); code != exitOK {
		t.Fatalf("lookup: %d %s", code, errs)
	}
	if code, _, errs := exe(t, as("auditor"), "evidence", f.rowID[:12]); code != exitOK {
		t.Fatalf("evidence: %d %s", code, errs)
	}
	code, out, errs := exe(t, as("admin"), "access-log", "--principal", "acct-48213")
	if code != exitOK || !strings.Contains(out, "SEQ") || !strings.Contains(out, "support") || !strings.Contains(out, "ListRows") ||
		!strings.Contains(out, "principal=acct-48213") || !strings.Contains(out, "GetEvidence") || !strings.Contains(out, "row="+f.rowID[:12]+" of=acct-48213") {
		t.Fatalf("access-log --principal: %d\n%s%s", code, out, errs)
	}
	code, out, _ = exe(t, as("admin"), "access-log", "--by", "auditor", "-o", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 2 || recs[1][2] != "auditor" || recs[1][4] != "GetEvidence" || recs[1][5] != "row="+f.rowID+" of=acct-48213" || recs[1][6] != "1" || recs[1][7] != "ok" {
		t.Fatalf("access-log --by auditor as csv: %d %v %q", code, err, recs)
	}
	// The admin's own listings are reads of the log too, and say whose
	// reads they asked for.
	code, out, _ = exe(t, as("admin"), "access-log", "--by", "admin", "-o", "csv")
	recs, err = csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) < 2 || recs[1][4] != "ListAccessLog" || recs[1][5] != "principal=acct-48213" ||
		recs[len(recs)-1][4] != "ListAccessLog" || recs[len(recs)-1][5] != "by=auditor" {
		t.Fatalf("access-log --by admin as csv: %d %v %q", code, err, recs)
	}
	// A listing of the log carries records, not rows: its ROWS is "-",
	// not a 0 that reads as "nothing came back".
	for _, r := range recs[1:] {
		if r[6] != "-" {
			t.Errorf("a ListAccessLog read shows rows %q, want -: %q", r[6], r)
		}
	}
	code, out, _ = exe(t, as("admin"), "access-log", "--limit", "1", "--all")
	if code != exitOK || strings.Count(out, "\n") < 5 || strings.Contains(out, "more of the log") {
		t.Fatalf("access-log --all: %d\n%s", code, out)
	}
	if code, _, errs := exe(t, as("support"), "access-log"); code != exitAuth || !strings.Contains(errs, "access-log needs a key with the role admin") {
		t.Fatalf("support reading the access log: %d %s", code, errs)
	}
}
