package main

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// cutAnswers answers as a ledger cuts its answers: GetGrant of a grant
// with more rows than one answer reads (a2agrant_many) or with a list
// past 128 KiB (a2agrant_wide), and ListRows a page that read its bound
// of entries before it found a row.
type cutAnswers struct {
	ledgerv1.UnimplementedLedgerServiceServer
}

func (cutAnswers) GetGrant(_ context.Context, r *ledgerv1.GetGrantRequest) (*ledgerv1.GetGrantResponse, error) {
	out := &ledgerv1.GetGrantResponse{GrantId: r.GetGrantId(), Principals: []string{"acct-48213"}, ScopesUsed: []string{"orders:cancel"},
		Rows: []*ledgerv1.Row{{Id: strings.Repeat("ab", 32), Principal: "acct-90001"}}, RowCount: 1, ListsTruncated: true}
	if r.GetGrantId() == "a2agrant_many" {
		out.RowCount, out.RowsTruncated, out.RowCountTruncated = 10000, true, true
	}
	return out, nil
}

func (cutAnswers) ListRows(context.Context, *ledgerv1.ListRowsRequest) (*ledgerv1.ListRowsResponse, error) {
	return &ledgerv1.ListRowsResponse{NextPageToken: "more"}, nil
}

// ledgerctl grant says why its lists may leave a value out: the grant
// has more rows than one answer reads (the lists are drawn from its
// newest rows and its newest receipts whose signature passed), or a list
// passed what one answer carries. lookup --output csv keeps its CSV on
// stdout and says that more may match on stderr, as every --output csv
// says what is not in its rows; a table says it under the table.
func TestCutAnswersAreSaid(t *testing.T) {
	as := ctlAgainst(t, cutAnswers{})
	ctl := func(args ...string) (int, string, string) { return as("support", args...) }
	const more = "(more may match: the ledger reads a bounded number of entries a call; --all reads on to the end)"
	tests := []struct {
		name       string
		args       []string
		out, errs  []string // in the output, on stderr
		notOut     []string
		csvRecords int // stdout is CSV of this many records, when above 0
	}{
		{name: "a grant with more rows than one answer reads", args: []string{"grant", "a2agrant_many"},
			out:    []string{"acct-48213", "(principals, agent platforms or scopes may be left out: they are drawn from the grant's newest 10000 rows and its newest 10000 receipts whose signature passed, and the grant has more rows)"},
			notOut: []string{"name more than an answer carries", "128 KiB"}},
		{name: "a grant with a list past what one answer carries", args: []string{"grant", "a2agrant_wide"},
			out:    []string{"(principals, agent platforms or scopes left out: a list passed the 128 KiB one answer carries)"},
			notOut: []string{"name more than an answer carries", "newest"}},
		{name: "lookup as a table", args: []string{"lookup", "--grant", "a2agrant_many"}, out: []string{"no rows match in the part of the ledger read so far", more}},
		{name: "lookup as CSV", args: []string{"lookup", "--grant", "a2agrant_many", "--output", "csv"}, errs: []string{more}, notOut: []string{"more may match"}, csvRecords: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := ctl(tc.args...)
			if code != exitOK {
				t.Fatalf("%v: exit %d\n%s%s", tc.args, code, out, errs)
			}
			for _, want := range tc.out {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for _, want := range tc.errs {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
			for _, not := range tc.notOut {
				if strings.Contains(out, not) {
					t.Errorf("output holds %q:\n%s", not, out)
				}
			}
			if tc.csvRecords > 0 {
				if recs, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err != nil || len(recs) != tc.csvRecords {
					t.Errorf("stdout: %d CSV records, %v; want %d:\n%s", len(recs), err, tc.csvRecords, out)
				}
			}
		})
	}
}
