package main

import (
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
