package main

import (
	"testing"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A read's query column says whose rows its reply carried, past the
// principal its query named: three and how many more in a table, all in
// CSV, ending "…" where the log cut the list.
func TestAccessQueryShowsWhoseRowsCameBack(t *testing.T) {
	many := []string{"acct-1", "acct-2", "acct-3", "acct-4", "acct-5"}
	tests := []struct {
		r          *ledgerv1.AccessRecord
		table, csv string
	}{
		{&ledgerv1.AccessRecord{Target: "A-5531", RowPrincipals: []string{"acct-48213"}}, "target=A-5531 of=acct-48213", "target=A-5531 of=acct-48213"},
		{&ledgerv1.AccessRecord{Principal: "acct-48213", RowPrincipals: []string{"acct-48213"}}, "principal=acct-48213", "principal=acct-48213"},
		{&ledgerv1.AccessRecord{RowPrincipals: many}, "of=acct-1,acct-2,acct-3,+2", "of=acct-1,acct-2,acct-3,acct-4,acct-5"},
		{&ledgerv1.AccessRecord{RowPrincipals: many[:1], RowPrincipalsTruncated: true}, "of=acct-1,…", "of=acct-1,…"},
		{&ledgerv1.AccessRecord{GrantId: "g-1"}, "grant=g-1", "grant=g-1"},
	}
	for _, tc := range tests {
		if got := (&cli{}).accessQuery(tc.r); got != tc.table {
			t.Errorf("table: %q, want %q", got, tc.table)
		}
		if got := (&cli{output: "csv"}).accessQuery(tc.r); got != tc.csv {
			t.Errorf("csv: %q, want %q", got, tc.csv)
		}
	}
}
