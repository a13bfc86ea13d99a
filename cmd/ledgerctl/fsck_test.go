package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
)

// TestFsckSummaryAddsUp: fsck prints the count of rows checked once, and
// its parts add up to it, read-only rows (which keep no evidence to
// compare) among them.
func TestFsckSummaryAddsUp(t *testing.T) {
	f := start(t)
	f.append(t, pacttest.Spec{Target: "O-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	code, out, errs := f.ctl(t, "auditor", "fsck")
	if code != 0 {
		t.Fatalf("fsck: %d\n%s%s", code, out, errs)
	}
	if n := strings.Count(out+errs, "3 rows"); n != 1 {
		t.Errorf("the count of rows checked is printed %d times, want once:\n%s%s", n, errs, out)
	}
	m := regexp.MustCompile(`3 rows checked: (\d+) compared with their write-once copy, (\d+) still in the outbox, (\d+) read-only`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary of the parts:\n%s", out)
	}
	sum := 0
	for _, s := range m[1:] {
		n, _ := strconv.Atoi(s)
		sum += n
	}
	if sum != 3 || m[3] != "1" {
		t.Errorf("parts %v add up to %d, want 3 with 1 read-only:\n%s", m[1:], sum, out)
	}
}

// TestFsckRestoreRefusesAnAuditorUpFront: --restore needs an admin key.
// An auditor's is refused before anything is checked or restored, with the
// role error, even when nothing would need restoring.
func TestFsckRestoreRefusesAnAuditorUpFront(t *testing.T) {
	f := start(t)
	code, out, errs := f.ctl(t, "auditor", "fsck", "--restore")
	if code != exitAuth || !strings.Contains(errs, "not allowed") || !strings.Contains(errs, "RestoreEvidence") || strings.Contains(out, "restored") || strings.Contains(out, "checked") {
		t.Fatalf("fsck --restore as auditor: exit %d, want %d refused up front\n%s%s", code, exitAuth, out, errs)
	}
	if code, out, errs := f.ctl(t, "admin", "fsck", "--restore"); code != 0 || !strings.Contains(out, "restored 0 rows") {
		t.Fatalf("fsck --restore as admin: %d\n%s%s", code, out, errs)
	}
}
