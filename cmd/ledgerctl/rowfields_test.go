package main

import (
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// A row's target or principal edited in the bbolt file, with ledgerd
// stopped, its evidence and leaf untouched: fsck and verify exit non-zero
// and say which field differs from the evidence. The write-once copy
// cannot mend it. A read-only row keeps no evidence: fsck says its fields
// were not compared.
func TestFsckAndVerifyFindAnEditedRowField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *ledger.Row)
		want string
	}{
		{"target", func(r *ledger.Row) { r.Actions[0].Target = "A-7777" },
			"the row's target of cancel_order is A-7777; its evidence says A-5531: the row was edited after it was written"},
		{"target source", func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetFromWriter },
			`the row's target source of cancel_order is "the action log alone"; its evidence says "the signed args": the row was edited after it was written`},
		{"principal", func(r *ledger.Row) { r.Principal = "acct-99999" },
			"the row's principal is acct-99999; its evidence says acct-48213: the row was edited after it was written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			f.append(t, pacttest.Spec{Target: "O-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
			code, out, errs := f.ctl(t, "auditor", "fsck")
			if code != 0 || !strings.Contains(out, "no evidence differs") || !strings.Contains(out, "no row's fields differ from its evidence") {
				t.Fatalf("fsck before the edit: %d\n%s%s", code, out, errs)
			}
			if !strings.Contains(out, "1 read-only, whose evidence is not kept") || !strings.Contains(out, "fields are not compared") {
				t.Fatalf("fsck does not say what a read-only row's check leaves out:\n%s", out)
			}
			f.edit(t, tamper.EditRow(f.rowID, tc.edit))

			code, out, errs = f.ctl(t, "auditor", "fsck")
			if code != exitCheckFailed || !strings.Contains(out, "DIFFERS "+f.rowID+": "+tc.want) {
				t.Fatalf("fsck after the edit: %d\n%s%s\nwant %q", code, out, errs, tc.want)
			}
			code, out, errs = f.ctl(t, "auditor", "verify", f.rowID)
			if code != exitCheckFailed || !strings.Contains(out, "DIFFERENT from write time: "+tc.want) {
				t.Fatalf("verify after the edit: %d\n%s%s\nwant %q", code, out, errs, tc.want)
			}
			code, out, errs = f.ctl(t, "admin", "fsck", "--restore")
			if code != exitCheckFailed || !strings.Contains(out, "restored 0 rows from the write-once copy") || !strings.Contains(out, "cannot be mended") {
				t.Fatalf("fsck --restore after the edit: %d\n%s%s", code, out, errs)
			}
		})
	}
}
