package main

// The bounds of what the audit reads from the server, and what its
// verdict says it did not check.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// listingClient answers ListRows with an empty page and a next page
// token, for ever: token gives the n-th token.
type listingClient struct {
	ledgerv1.LedgerServiceClient
	token func(n int) string
	n     int
}

func (c *listingClient) ListRows(context.Context, *ledgerv1.ListRowsRequest, ...grpc.CallOption) (*ledgerv1.ListRowsResponse, error) {
	c.n++
	return &ledgerv1.ListRowsResponse{NextPageToken: c.token(c.n)}, nil
}

// A server whose listing of rows never ends would keep the audit running
// for ever: a page token given twice, or more empty pages than the log's
// rows can explain, fails the audit.
func TestAuditStopsAListingOfRowsThatNeverEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token func(int) string
		want  string
	}{
		{"the same token", func(int) string { return "again" }, "a second time"},
		{"new tokens", func(n int) string { return fmt.Sprint("page-", n) }, "goes on past what the log can hold"},
	} {
		a, out := testAuditor()
		lc := &listingClient{token: tc.token}
		a.c.c = lc
		a.newer.Size = 5000
		err := a.everyRowHasALeaf("", 0)
		if !errors.Is(err, errCheckFailed) || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: %v after %d pages:\n%s", tc.name, err, lc.n, out)
		}
		if _, empty := listBounds(a.newer.Size); lc.n > empty+2 {
			t.Fatalf("%s: %d pages read", tc.name, lc.n)
		}
	}
}

// The tiles are read from the ledger's host: a redirect to another host
// is refused, one within the host followed.
func TestAuditTilesRefuseARedirectToAnotherHost(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("forged")) }))
	defer other.Close()
	ledger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/log/away":
			http.Redirect(w, r, other.URL+"/v1/log/tile", http.StatusFound)
		case "/v1/log/here":
			http.Redirect(w, r, "/v1/log/tile", http.StatusFound)
		default:
			_, _ = w.Write([]byte("tile"))
		}
	}))
	defer ledger.Close()
	// 127.0.0.1 and localhost: two hosts on loopback.
	other.URL = strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	tr := &tiles{base: ledger.URL, client: tileClient(5*time.Second, nil)}
	if b, err := tr.get("here"); err != nil || string(b) != "tile" {
		t.Fatalf("a redirect within the host: %q, %v", b, err)
	}
	b, err := tr.get("away")
	if err == nil || !strings.Contains(err.Error(), "refused a redirect") {
		t.Fatalf("a redirect to another host: %q, %v", b, err)
	}
}

// The default audit looks up at most maxPresenceChecks rows logged before
// the kept checkpoint and no longer listed: its verdict says how many it
// did not check, and that --all checks them.
func TestAuditVerdictSaysHowManyDeletionsItDidNotCheck(t *testing.T) {
	a, _ := testAuditor()
	now := time.Now().UTC()
	for i := range maxPresenceChecks + 7 {
		id := fmt.Sprintf("r%d", i)
		a.older = append(a.older, rowLeafRef{index: int64(i), kind: "receipt", id: id, class: "read_only", status: "authorized", recorded: now.AddDate(-1, 0, 0).Format(time.RFC3339Nano)})
		a.tombstones[id] = &tombstone{class: "read_only", status: "authorized", retainUntil: now.AddDate(0, -1, 0).Format(time.RFC3339), sweptAt: now.AddDate(0, -1, 0).Format(time.RFC3339)}
	}
	if err := a.checkRowsPresent(); err != nil {
		t.Fatal(err)
	}
	line := a.passed(true)
	if !strings.Contains(line, "NOT CHECKED: 7 rows") || !strings.Contains(line, "--all") {
		t.Fatalf("verdict: %s", line)
	}
	a.unchecked = 0
	if line := a.passed(true); strings.Contains(line, "NOT CHECKED") {
		t.Fatalf("verdict of an audit that checked every row: %s", line)
	}
}
