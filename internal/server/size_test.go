package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// postFat posts a receipt signed by a key of the writer's own under the
// brand's kid, naming user, grant and target, as large as the write limits
// allow: 64 logged actions with 500-byte tools and targets (each failing
// args_hash), 1,400 scopes used.
func postFat(t *testing.T, e *env, i int, user, grant, target string) {
	t.Helper()
	r := e.sc.Mint(pacttest.Spec{User: user, GrantID: grant, Target: target})
	scopes := make([]string, 1400)
	for j := range scopes {
		scopes[j] = fmt.Sprintf("s%d", j)
	}
	r.Claims["scopesUsed"] = scopes
	r.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(r.Claims)
	body := post(r)
	actions := []map[string]string{{"tool": "cancel_order", "target": target, "argsJson": r.Actions[0].ArgsJSON}}
	for j := 1; j < 64; j++ {
		long := fmt.Sprintf("%0500d-%d", j, i)
		actions = append(actions, map[string]string{"tool": long, "target": long, "argsJson": "{}"})
	}
	body["actions"] = actions
	var rep hostileReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", body, &rep); code != 200 {
		t.Fatalf("post %d: %d", i, code)
	}
}

// Rows as large as a writer may make them are answered a few at a time:
// a ListRows page ends early with a token that lists the rest, and
// GetGrant and GetIncident cut their lists of rows and say so; no answer
// passes the bound, which lies well under gRPC's default 4 MiB.
func TestFatRowsAnswerWithinTheSizeBound(t *testing.T) {
	const bound = 50 << 10
	server.SetAnswerRowBytes(t, bound)
	e := newEnv(t, jose.ES256)
	const user, grant, target = "acct-fat", "a2agrant_fat", "F-1"
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: user, GrantID: grant, Target: target})), nil); code != 200 {
		t.Fatalf("receipt: %d", code)
	}
	inc := e.sc.Mint(pacttest.Spec{User: "acct-other", GrantID: "a2agrant_other", Target: "O-1", ScopesUsed: []string{"orders:refund"}})
	var irep struct {
		Row struct {
			IncidentID string `json:"incidentId"`
		} `json:"row"`
	}
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(inc), &irep); code != 200 || irep.Row.IncidentID == "" {
		t.Fatalf("incident receipt: %d %+v", code, irep.Row)
	}
	const fat = 6
	for i := range fat {
		postFat(t, e, i, user, grant, target)
	}
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx := authCtx(context.Background(), "support")
	within := func(what string, m proto.Message) {
		t.Helper()
		if n := proto.Size(m); n > bound+8<<10 {
			t.Errorf("%s: %d bytes, over the bound %d", what, n, bound)
		}
	}

	seen := map[string]bool{}
	pages := 0
	for token := ""; ; {
		pages++
		page, err := c.ListRows(ctx, &ledgerv1.ListRowsRequest{Target: target, PageToken: token})
		if err != nil {
			t.Fatalf("ListRows page %d: %v", pages, err)
		}
		within("ListRows page", page)
		if len(page.GetRows()) == 0 {
			t.Fatalf("page %d holds no row", pages)
		}
		for _, r := range page.GetRows() {
			if seen[r.GetId()] {
				t.Fatalf("row %s listed twice", r.GetId())
			}
			seen[r.GetId()] = true
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != fat+1 || pages < 2 {
		t.Fatalf("ListRows listed %d rows in %d pages; want %d rows in several pages", len(seen), pages, fat+1)
	}

	g, err := c.GetGrant(ctx, &ledgerv1.GetGrantRequest{GrantId: grant})
	if err != nil {
		t.Fatalf("GetGrant: %v", err)
	}
	within("GetGrant", g)
	if g.GetRowCount() != fat+1 || len(g.GetRows()) == 0 || len(g.GetRows()) >= fat+1 || !g.GetRowsTruncated() {
		t.Fatalf("GetGrant: %d of %d rows, truncated %v", len(g.GetRows()), g.GetRowCount(), g.GetRowsTruncated())
	}

	gi, err := c.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: irep.Row.IncidentID})
	if err != nil {
		t.Fatalf("GetIncident: %v", err)
	}
	within("GetIncident", gi)
	if gi.GetSameDayCount() != fat+1 || len(gi.GetSameDayRows()) >= fat+1 || !gi.GetSameDayRowsTruncated() {
		t.Fatalf("GetIncident: %d of %d same-day rows, truncated %v", len(gi.GetSameDayRows()), gi.GetSameDayCount(), gi.GetSameDayRowsTruncated())
	}
}
