package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// postFatLog posts a receipt the Brand signed, as a writer holding one
// may, with 63 more logged actions beside the one it signs, each with a
// 500-byte tool and target: within every write limit. A drill's
// action_log pull lists each logged action the receipt does not sign.
func postFatLog(t *testing.T, c ledgerv1.LedgerServiceClient, e *env, i int) {
	t.Helper()
	r := e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("D-%d", i)})
	req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
		Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
	for j := 1; j < 64; j++ {
		long := fmt.Sprintf("%0500d-%d", j, i)
		req.Actions = append(req.Actions, &ledgerv1.Action{Tool: long, Target: long, ArgsJson: "{}"})
	}
	if _, err := c.AppendReceipt(authCtx(context.Background(), "writer"), req); err != nil {
		t.Fatalf("post %d: %v", i, err)
	}
}

// A writer's posts within every write limit made the report of a monthly
// drill of 80 rows 4.7 MB, each row's action_log pull listing 63 logged
// actions of 1 KB: past the 4 MiB a gRPC client receives by default, so
// RunDrill, GetDrill and ListDrills failed with RESOURCE_EXHAUSTED. An
// answer carries each detail up to 2 KiB, saying how much was left out,
// and details_truncated says a detail was cut.
func TestFatDrillReportAnswersWithinBound(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	const fat = 80
	for i := range fat {
		postFatLog(t, c, e, i)
	}
	ctx := authCtx(context.Background(), "support")
	within := func(what string, d *ledgerv1.DrillReport) {
		t.Helper()
		if n := proto.Size(d); n > 2<<20 {
			t.Errorf("%s: the report is %d bytes, over 2 MiB", what, n)
		}
		if len(d.GetRows()) != fat || len(d.GetPulls()) != 6*fat || !d.GetDetailsTruncated() {
			t.Fatalf("%s: %d rows, %d pulls, details truncated %v; want %d rows, %d pulls, truncated", what, len(d.GetRows()), len(d.GetPulls()), d.GetDetailsTruncated(), fat, 6*fat)
		}
		for _, p := range d.GetPulls() {
			if n := len(p.GetDetail()); n > 2048+32 {
				t.Fatalf("%s: the %s pull's detail is %d bytes", what, p.GetName(), n)
			}
			if p.GetName() == "action_log" && !strings.HasSuffix(p.GetDetail(), " bytes more)") {
				t.Fatalf("%s: the action_log detail does not say it was cut: …%s", what, p.GetDetail()[max(0, len(p.GetDetail())-80):])
			}
		}
	}

	run, err := c.RunDrill(ctx, &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 100}})
	if err != nil {
		t.Fatalf("RunDrill: %v", err)
	}
	within("RunDrill", run.GetReport())
	got, err := c.GetDrill(ctx, &ledgerv1.GetDrillRequest{Id: run.GetReport().GetId()})
	if err != nil {
		t.Fatalf("GetDrill: %v", err)
	}
	within("GetDrill", got.GetReport())
	if got.GetReport().GetObject().GetKey() == "" {
		t.Errorf("GetDrill names no write-once object, which holds the report whole")
	}
	list, err := c.ListDrills(ctx, &ledgerv1.ListDrillsRequest{})
	if err != nil {
		t.Fatalf("ListDrills: %v", err)
	}
	if len(list.GetReports()) != 1 {
		t.Fatalf("ListDrills: %d reports", len(list.GetReports()))
	}
	within("ListDrills", list.GetReports()[0])
}

// ListDrills answered pageSize reports (100 by default) whatever their
// size: 24 monthly drills of 100 rows, each report 240 to 290 KB (more
// when its rows' log proofs are in it), made its first page over 5.7 MB,
// past the 4 MiB a gRPC client receives by default (RESOURCE_EXHAUSTED). A page now ends before the report that would take
// it past 2 MiB, with a token for the rest, and holds one report at least.
func TestListDrillsPagesBySize(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	w := authCtx(context.Background(), "writer")
	for i := range 100 {
		r := e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("M-%d", i)})
		req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
		if _, err := c.AppendReceipt(w, req); err != nil {
			t.Fatal(err)
		}
	}
	ctx := authCtx(context.Background(), "support")
	var ids []string
	for range 24 {
		run, err := c.RunDrill(ctx, &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 100}})
		if err != nil {
			t.Fatalf("RunDrill: %v", err)
		}
		ids = append([]string{run.GetReport().GetId()}, ids...) // newest first
	}
	list := func(pageSize int32, bound int) (ids []string, pages int) {
		t.Helper()
		for token := ""; ; {
			pages++
			page, err := c.ListDrills(ctx, &ledgerv1.ListDrillsRequest{PageSize: pageSize, PageToken: token})
			if err != nil {
				t.Fatalf("ListDrills page %d: %v", pages, err)
			}
			if len(page.GetReports()) == 0 {
				t.Fatalf("page %d holds no report", pages)
			}
			if n := proto.Size(page); len(page.GetReports()) > 1 && n > bound {
				t.Fatalf("page %d: %d reports in %d bytes, over %d", pages, len(page.GetReports()), n, bound)
			}
			for _, d := range page.GetReports() {
				ids = append(ids, d.GetId())
			}
			if token = page.GetNextPageToken(); token == "" {
				return ids, pages
			}
		}
	}
	got, pages := list(0, 2<<20+64)
	if fmt.Sprint(got) != fmt.Sprint(ids) || pages < 3 {
		t.Fatalf("ListDrills listed %d reports in %d pages; want the %d reports, newest first, in 3 pages or more", len(got), pages, len(ids))
	}
	// A budget below any report: a page of the one report, and a token
	// past it.
	server.SetAnswerRowBytes(t, 1)
	if got, pages := list(7, 1); fmt.Sprint(got) != fmt.Sprint(ids) || pages != len(ids) {
		t.Fatalf("with a budget below one report: %d reports in %d pages; want %d in as many pages", len(got), pages, len(ids))
	}
}
