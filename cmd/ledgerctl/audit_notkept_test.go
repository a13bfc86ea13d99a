package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// Only a read-only receipt keeps no evidence. A row whose evidence the
// row store marks not kept while its leaf logs another class (here
// money_moved) hides the evidence the leaf commits to: it is a finding,
// while a read-only receipt's row, which keeps none, is not.
func TestAuditFindsEvidenceNotKeptOnAMoneyMovedRow(t *testing.T) {
	f := start(t)
	readOnly := f.append(t, pacttest.Spec{Target: "O-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	f.logged(t, readOnly)
	kept, _, key := f.keptAudit(t) // passes with the read-only row
	f.edit(t, tamper.EditRow(f.rowID, func(r *ledger.Row) {
		r.EvidenceNotKept = "read-only class: the receipt, tokens and args are not kept (personal data stays short-lived)"
		r.Principal, r.Actions[0].Target = "acct-someone-else", "Z-0000"
	}))
	want := regexp.MustCompile(`MISMATCH leaf \d+ \((receipt of )?row ` + f.rowID + `\) differs from the ledger: the row says its evidence is not kept, but its leaf logs a receipt of class money_moved: only a read-only receipt keeps none`)
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !want.MatchString(out) {
			t.Fatalf("audit (--all %v): exit %d, want %d with %q\n%s%s", all, code, exitCheckFailed, want, out, errs)
		}
		if strings.Contains(out, readOnly) {
			t.Errorf("audit (--all %v) names the read-only row %s:\n%s", all, readOnly, out)
		}
	}
}
