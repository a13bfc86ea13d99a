package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDrillOfARowIDHintsAtRow: a drill of an order id that reads as a row
// id (the 12 characters tables print), about which no row is, says on
// stderr that --row may be meant; an order id that is not one, or a
// drill that found rows, says nothing of the kind.
func TestDrillOfARowIDHintsAtRow(t *testing.T) {
	f := start(t)
	prefix := f.rowID[:12]
	hint := "did you mean --row " + prefix + "?"
	code, out, errs := f.ctl(t, "support", "drill", prefix)
	if code != exitCheckFailed || !strings.Contains(errs, hint) || strings.Contains(out, hint) {
		t.Fatalf("drill %s: exit %d, want %d and %q on stderr\nstdout:\n%s\nstderr:\n%s", prefix, code, exitCheckFailed, hint, out, errs)
	}
	if code, _, errs := f.ctl(t, "support", "drill", strings.ToUpper(prefix)); code != exitCheckFailed || !strings.Contains(errs, "did you mean --row "+strings.ToUpper(prefix)+"?") {
		t.Errorf("drill of an upper-case row id: exit %d, no hint:\n%s", code, errs)
	}
	if code, _, errs := f.ctl(t, "support", "--json", "drill", prefix); code != exitCheckFailed || !strings.Contains(errs, hint) {
		t.Errorf("drill --json %s: exit %d, no hint on stderr:\n%s", prefix, code, errs)
	}
	if code, out, errs := f.ctl(t, "support", "drill", "--row", prefix); code != 0 || !strings.Contains(out, "score: 6 of 6") || strings.Contains(errs, "did you mean") {
		t.Errorf("drill --row %s: exit %d\n%s%s", prefix, code, out, errs)
	}
	for _, args := range [][]string{{"drill", "A-0000"}, {"drill", "A-5531"}, {"drill", "deadbeef"}} {
		_, _, errs := f.ctl(t, "support", args...)
		if args[1] == "deadbeef" {
			if !strings.Contains(errs, "did you mean --row deadbeef?") {
				t.Errorf("%s: no hint:\n%s", strings.Join(args, " "), errs)
			}
			continue
		}
		if strings.Contains(errs, "did you mean") {
			t.Errorf("%s: hints at --row:\n%s", strings.Join(args, " "), errs)
		}
	}
}

// TestEmptyLookupSaysIdsMatchExactly: a lookup by an id that matches no
// row (another case, a typo) says, as the console's search does, that ids
// match exactly; one that matches rows, or a filter without an id, does
// not; with --json the words go to stderr and the output stays JSON.
func TestEmptyLookupSaysIdsMatchExactly(t *testing.T) {
	f := start(t)
	const hint = "ids match exactly: check the spelling and the case"
	for _, args := range [][]string{{"lookup", "--order", "a-5531"}, {"lookup", "--principal", "ACCT-48213"}, {"lookup", "--grant", "a2agrant_7q2f"}} {
		code, out, errs := f.ctl(t, "support", args...)
		if code != 0 || !strings.Contains(out, "no rows match") || !strings.Contains(out, hint) {
			t.Errorf("%s: exit %d, want 0, no rows and %q:\n%s%s", strings.Join(args, " "), code, hint, out, errs)
		}
	}
	if code, out, errs := f.ctl(t, "support", "lookup", "--order", "A-5531"); code != 0 || strings.Contains(out+errs, hint) {
		t.Errorf("lookup --order A-5531: exit %d, hints though it matched:\n%s%s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "support", "lookup", "--status", "incident"); code != 0 || !strings.Contains(out, "no rows match") || strings.Contains(out+errs, hint) {
		t.Errorf("lookup --status incident: exit %d, hints with no id given:\n%s%s", code, out, errs)
	}
	code, out, errs := f.ctl(t, "support", "--json", "lookup", "--order", "a-5531")
	var rep struct{ Rows []any }
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Rows) != 0 || !strings.Contains(errs, hint) {
		t.Errorf("--json lookup --order a-5531: exit %d (%v), want JSON and %q on stderr:\n%s%s", code, err, hint, out, errs)
	}
	if code, out, errs := f.ctl(t, "support", "--output", "csv", "lookup", "--order", "a-5531"); code != 0 || strings.Contains(out, hint) || !strings.Contains(errs, hint) {
		t.Errorf("--output csv lookup --order a-5531: exit %d, want the hint on stderr only:\n%s%s", code, out, errs)
	}
}
