package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// A row's dispute status is what its dispute events give, and they are in
// the Merkle log: an edit of the status alone in the row store shows
// nowhere (show, lookups and the console read the events' state) and
// fsck reports it.
func TestADisputeStatusEditedAloneShowsNowhere(t *testing.T) {
	f := start(t)
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "never asked"); code != 0 {
		t.Fatalf("dispute: %s", errs)
	}
	f.edit(t, tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Dispute = ledger.DisputeResolvedCustomerAuthorized }))
	_, show, errs := f.ctl(t, "support", "show", f.rowID)
	if !regexp.MustCompile(`(?m)^dispute\s+open$`).MatchString(show) || strings.Contains(show, "resolved") {
		t.Errorf("show after the row's dispute status alone was edited to resolved: want the events' open:\n%s%s", show, errs)
	}
	code, out, errs := f.ctl(t, "auditor", "fsck")
	if want := "the row's dispute status is resolved_customer_authorized; its dispute events give open: the row was edited after it was written"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("fsck: exit %d, want 1 with %q:\n%s%s", code, want, out, errs)
	}
}
