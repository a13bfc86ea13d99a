package console_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// EnvScreenshots names the environment variable that makes
// TestConsoleScreenshots write docs/console-*.png (`make console-screenshots`).
const EnvScreenshots = "PACTLEDGER_CONSOLE_SCREENSHOTS"

// TestConsoleScreenshots regenerates the screenshots in docs/console.md
// from a ledger holding the playbook's worked scenario and a few other
// rows.
func TestConsoleScreenshots(t *testing.T) {
	if os.Getenv(EnvScreenshots) == "" {
		t.Skip(EnvScreenshots + " is not set (make console-screenshots sets it)")
	}
	e := newEnv(t, nil)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	row := e.playbook(t)
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at.Add(-4 * time.Minute)}))
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-10977", GrantID: "a2agrant_8M0A", Target: "orders", Tool: "lookup_orders", Granted: "orders:read", ScopesUsed: []string{"orders:read"}, At: at.Add(-4*time.Hour - 31*time.Minute)}))
	inc := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-22760", GrantID: "a2agrant_9T4K", Target: "plan-22760", Tool: "downgrade_plan", Granted: "billing:read", ScopesUsed: []string{"plan:change"}, At: at.Add(-2*time.Hour - 9*time.Minute)}))
	if _, err := e.client.AppendRefusal(as(config.RoleWriter), &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct 30418", ClaimedAgent: "assistant from MyHelper",
		Action: &ledgerv1.RefusalAction{Tool: "change_address", Target: "acct-30418"}, Reason: "no receipt; routed to human", ObservedAt: timestamppb.New(time.Now().Add(-time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.AppendDisputeEvent(as(config.RoleSupport), &ledgerv1.AppendDisputeEventRequest{Id: row.GetId(), Status: ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN, Note: "customer: I never approved cancelling order A-5531"}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := e.client.RunDrill(as(config.RoleSupport), &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 4}}); err != nil {
			t.Fatal(err)
		}
	}
	drill, err := e.client.RunDrill(as(config.RoleSupport), &ledgerv1.RunDrillRequest{RowId: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}

	ctx := browser(t)
	shot := func(name string, w, h int64, path, waitID string) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.EmulateViewport(w, h),
			chromedp.Navigate(e.web.URL+path),
			chromedp.WaitVisible(chromedp.ID(waitID)),
		)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "console-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shot("signin", 1280, 720, "/console/signin", "key")
	e.signIn(t, ctx, config.RoleSupport)
	shot("search", 1280, 720, "/console/search?q=A-5531", "matched")
	shot("row", 1280, 900, "/console/rows/"+row.GetId(), "row-id")
	shot("drill", 1280, 900, "/console/drills/"+drill.GetReport().GetId(), "reply")
	shot("drills", 1280, 800, "/console/drills", "score-chart")
	shot("incident", 1280, 800, "/console/incidents/"+inc.GetIncidentId(), "incident-state")
	shot("phone-drill", 390, 844, "/console/drills/"+drill.GetReport().GetId(), "reply")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("key"))); err != nil {
		t.Fatal(err)
	}
	e.signIn(t, ctx, config.RoleAuditor)
	shot("grant", 1280, 720, "/console/grant?id=a2agrant_7Q2F", "grant-rows")
	shot("phone-row", 390, 844, "/console/rows/"+row.GetId(), "row-id")
}
