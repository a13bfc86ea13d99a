package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/console"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// cutGrants is the console's client with GetGrant's answer cut as a
// ledger cuts the answer of a grant past its bounds (more rows than one
// answer reads or carries, lists past 128 KiB), which takes more than
// 10,000 rows to make: cut, when set, edits the ledger's real answer.
type cutGrants struct {
	ledgerv1.LedgerServiceClient
	cut *func(*ledgerv1.GetGrantResponse)
}

func (c cutGrants) GetGrant(ctx context.Context, in *ledgerv1.GetGrantRequest, opts ...grpc.CallOption) (*ledgerv1.GetGrantResponse, error) {
	out, err := c.LedgerServiceClient.GetGrant(ctx, in, opts...)
	if err == nil && *c.cut != nil {
		(*c.cut)(out)
	}
	return out, err
}

// The grant page, and its exports, say where GetGrant's answer was cut:
// the lists (listsTruncated), the rows (rowsTruncated) and the count
// (rowCountTruncated). A cut list or count is said on the page and in
// the JSON export; a CSV export that would hold part of the rows is
// refused, with where every row is, as a CSV file has no place to say
// it is cut short.
func TestGrantPageAndExportsSayWhereTheAnswerWasCut(t *testing.T) {
	var cut func(*ledgerv1.GetGrantResponse)
	e := newEnv(t, nil, func(_ *env, c *console.Config) { c.Client = cutGrants{c.Client, &cut} })
	e.playbook(t)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAuditor)
	const grant = "a2agrant_7Q2F"
	tests := []struct {
		name     string
		cut      func(*ledgerv1.GetGrantResponse)
		page     []string // on the grant page, in order
		notPage  []string
		csv      int // the CSV export's status
		csvWords string
		json     map[string]bool
	}{
		{name: "nothing cut", page: []string{`id="export-csv"`}, notPage: []string{`id="lists-cut"`, `id="rows-cut"`},
			csv: http.StatusOK, json: map[string]bool{"listsTruncated": false, "rowsTruncated": false, "rowCountTruncated": false}},
		{name: "more rows than one answer reads",
			cut: func(g *ledgerv1.GetGrantResponse) {
				g.RowCount, g.RowCountTruncated, g.RowsTruncated, g.ListsTruncated = 10000, true, true, true
			},
			page: []string{`id="lists-cut"`, "drawn from the grant's newest 10000 rows and its newest 10000 receipts whose signature passed, and this grant has more rows",
				`id="rows-cut"`, "This grant has more than 10000 rows", "ledgerctl lookup --grant " + grant + " --all", "No CSV export"},
			notPage: []string{`id="export-csv"`},
			csv:     http.StatusConflict, csvWords: "This grant has more than 10000 rows and one export holds the newest 1",
			json: map[string]bool{"listsTruncated": true, "rowsTruncated": true, "rowCountTruncated": true}},
		{name: "more rows than one answer carries",
			cut: func(g *ledgerv1.GetGrantResponse) { g.RowCount, g.RowsTruncated = 1500, true },
			page: []string{`id="rows-cut"`, "The newest 1 of the grant's 1500 rows are shown: one answer carries at most 1,000",
				"ledgerctl lookup --grant " + grant + " --all --output csv"},
			notPage: []string{`id="export-csv"`, `id="lists-cut"`},
			csv:     http.StatusConflict, csvWords: "This grant has 1500 rows and one export holds the newest 1",
			json: map[string]bool{"listsTruncated": false, "rowsTruncated": true, "rowCountTruncated": false}},
		{name: "a list past what one answer carries",
			cut:     func(g *ledgerv1.GetGrantResponse) { g.ListsTruncated = true },
			page:    []string{`id="lists-cut"`, "than one answer carries (128 KiB a list)", `id="export-csv"`},
			notPage: []string{`id="rows-cut"`},
			csv:     http.StatusOK, json: map[string]bool{"listsTruncated": true, "rowsTruncated": false, "rowCountTruncated": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cut = tc.cut
			code, page := c.get(t, "/console/grant?id="+grant)
			if code != http.StatusOK || !strings.Contains(page, "acct-48213") {
				t.Fatalf("grant page: %d, customer listed %v", code, strings.Contains(page, "acct-48213"))
			}
			rest := page
			for _, want := range tc.page {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("the grant page lacks %q (or not in order)", want)
					continue
				}
				rest = rest[i+len(want):]
			}
			for _, not := range tc.notPage {
				if strings.Contains(page, not) {
					t.Errorf("the grant page holds %q", not)
				}
			}

			code, body := c.get(t, "/console/grant/export?id="+grant+"&format=json")
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
				t.Fatalf("JSON export: %d %v", code, err)
			}
			for field, want := range tc.json {
				if v, ok := got[field].(bool); !ok || v != want {
					t.Errorf("JSON export %s = %v, want %v", field, got[field], want)
				}
			}

			code, body = c.get(t, "/console/grant/export?id="+grant+"&format=csv")
			if code != tc.csv {
				t.Fatalf("CSV export: %d, want %d\n%s", code, tc.csv, body)
			}
			if code != http.StatusOK {
				if !strings.Contains(body, tc.csvWords) || !strings.Contains(body, "ledgerctl lookup --grant "+grant+" --all --output csv") {
					t.Errorf("the CSV export's refusal lacks %q or where every row is:\n%s", tc.csvWords, body)
				}
				return
			}
			recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil || len(recs) != 2 {
				t.Errorf("CSV export: %d records, %v; want the header and the row", len(recs), err)
			}
		})
	}
}
