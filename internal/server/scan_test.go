package server_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A writer key posts forged receipts (a broken signature: UNAUTHORIZED
// rows) under a customer's order id for other principals, dated later
// than the customer's row. Support's lookup by the order and the
// customer, a row a page, must read a bounded number of index entries a
// page (ledger.MaxListRead), whatever the writer posted: the first page
// comes back empty with a token, and the customer's row follows on a
// later page. The ledger counts the entries its pages read.
func TestForgedRowsUnderAnOrderDoNotMakeAPageReadThemAll(t *testing.T) {
	if testing.Short() {
		t.Skip("posts 10,100 receipts")
	}
	e := newEnv(t, jose.ES256)
	const order, customer = "A-5531", "acct-48213"
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	var row struct{ Row Row }
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: customer, Target: order, At: at})), &row); code != 200 || row.Row.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("the customer's receipt: %d %s", code, row.Row.Status)
	}
	forged := ledger.MaxListRead + 100
	for i := 0; i < forged; i += 100 {
		var body struct {
			Receipts []map[string]any `json:"receipts"`
		}
		for j := i; j < min(i+100, forged); j++ {
			// Another principal's receipt, dated later, its signature
			// broken.
			r := e.sc.Mint(pacttest.Spec{User: fmt.Sprintf("acct-%d", 100000+j), GrantID: fmt.Sprintf("a2agrant_f%d", j), Target: order, At: at.Add(time.Duration(1+j) * time.Second)})
			r.ReceiptJWS = pacttest.TamperSignature(r.ReceiptJWS)
			body.Receipts = append(body.Receipts, post(r))
		}
		var rep struct {
			Results []struct {
				Code     int
				Response struct{ Row Row }
			}
		}
		if code := e.call(t, "POST", "/v1/receipts:batch", "writer", body, &rep); code != 200 || len(rep.Results) != len(body.Receipts) {
			t.Fatalf("batch at %d: %d, %d results", i, code, len(rep.Results))
		}
		for _, r := range rep.Results {
			if r.Code != 0 || r.Response.Row.Status != "ROW_STATUS_UNAUTHORIZED" {
				t.Fatalf("a forged receipt: code %d, %s", r.Code, r.Response.Row.Status)
			}
		}
	}

	q := url.Values{"target": {order}, "principal": {customer}, "pageSize": {"1"}}
	var pages []int
	var reads []int64
	var found []string
	for len(pages) < 5 {
		before := e.srv.Ledger().ListRead()
		var page struct {
			Rows          []Row
			NextPageToken string
		}
		if code := e.call(t, "GET", "/v1/rows?"+q.Encode(), "support", nil, &page); code != 200 {
			t.Fatalf("page %d: %d", len(pages)+1, code)
		}
		read := e.srv.Ledger().ListRead() - before
		if read > ledger.MaxListRead {
			t.Errorf("page %d read %d index entries, want at most %d", len(pages)+1, read, ledger.MaxListRead)
		}
		pages = append(pages, len(page.Rows))
		reads = append(reads, read)
		for _, r := range page.Rows {
			found = append(found, r.ID)
		}
		if page.NextPageToken == "" {
			break
		}
		q.Set("pageToken", page.NextPageToken)
	}
	t.Logf("rows a page %v, index entries read a page %v", pages, reads)
	if len(pages) < 2 || pages[0] != 0 {
		t.Errorf("rows a page %v: want the first page empty with a token (it read %d entries of %d rows under the order)", pages, ledger.MaxListRead, forged+1)
	}
	if len(found) != 1 || found[0] != row.Row.ID {
		t.Errorf("found %v, want the customer's row %s alone", found, row.Row.ID)
	}
}
