package main

import (
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// The audit runs support's lookups: a row whose entry in the index of
// one lookup was removed (support looking up its customer, order or grant
// misses it, while the listing and a read by id show it), or moved to a
// copy edited to name another customer (the lookup answers DATA_LOSS), is
// a mismatch naming the row and the lookup; fsck finds both too.
func TestAuditRunsSupportsLookups(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(id string) func(*bbolt.Tx) error
		audit string
	}{
		{"customer's entry removed", func(id string) func(*bbolt.Tx) error { return tamper.Unindex(id, "by_principal") },
			`row %s is not found by a lookup of its customer "acct-9", though the listing and a read by its id show it`},
		{"order's entry removed", func(id string) func(*bbolt.Tx) error { return tamper.Unindex(id, "by_target") },
			`row %s is not found by a lookup of its order "L-9"`},
		{"grant's entry removed", func(id string) func(*bbolt.Tx) error { return tamper.Unindex(id, "by_grant") },
			`row %s is not found by a lookup of its grant `},
		{"customer's entry leads to an edited copy", func(id string) func(*bbolt.Tx) error {
			return tamper.IndexCopy(id, func(r *ledger.Row) { r.Principal = "acct-other" }, "by_principal")
		}, `row %s is not found by a lookup of its customer "acct-9"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			f.logged(t, f.rowID)
			kept := f.keep(t)
			later := f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"})
			f.logged(t, later)
			key := f.verifierKey(t)
			code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key)
			if code != 0 || !strings.Contains(out, "lookups: 3 customers, 3 orders and 1 grant looked up as support and auditors do") {
				t.Fatalf("audit before the edit: %d\n%s%s", code, out, errs)
			}
			f.edit(t, tc.edit(later))
			want := strings.ReplaceAll(tc.audit, "%s", later)
			code, out, errs = f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key)
			if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) {
				t.Fatalf("audit after the edit: %d\n%s%s\nwant a mismatch saying %q", code, out, errs, want)
			}
			if code, out, errs := f.ctl(t, "auditor", "fsck"); code != exitCheckFailed || !strings.Contains(out, "row "+later) {
				t.Fatalf("fsck after the edit: %d\n%s%s", code, out, errs)
			}
		})
	}
}
