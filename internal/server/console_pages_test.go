package server_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

var (
	consoleCSRF   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	consoleReport = regexp.MustCompile(`href="/console/drills/(drill-[^"]+)"`)
	consoleOlder  = regexp.MustCompile(`<a href="(/console/drills\?page=[^"]+)">Older</a>`)
)

// The console's drill history shows a ListDrills page as the ledger ends
// it, and its Older link continues where the page ended: with pages of
// one report (a budget below any report), each page shows its one report
// and together they show every report once, newest first. (Dispute
// drills: the history's chart links monthly ones only.)
func TestConsoleDrillHistoryFollowsPagesCutBySize(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx := authCtx(context.Background(), "support")
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "A-5531"})), nil); code != 200 {
		t.Fatalf("receipt: %d", code)
	}
	var ids []string
	for range 3 {
		run, err := c.RunDrill(ctx, &ledgerv1.RunDrillRequest{Target: "A-5531"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{run.GetReport().GetId()}, ids...) // newest first
	}
	server.SetAnswerRowBytes(t, 1)

	get := consoleSession(t, e, "support")

	var got []string
	for path := "/console/drills"; ; {
		page := get(path)
		shown := consoleReport.FindAllStringSubmatch(page, -1)
		if len(shown) != 1 {
			t.Fatalf("%s shows %d reports, want the page's one", path, len(shown))
		}
		got = append(got, shown[0][1])
		older := consoleOlder.FindStringSubmatch(page)
		if older == nil {
			break
		}
		if path = html.UnescapeString(older[1]); len(got) > len(ids) {
			t.Fatalf("still an Older link after %d reports", len(got))
		}
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("the history showed %v; want %v", got, ids)
	}
}

// consoleSession signs in to the console with role's key and returns a
// function that GETs a console path in that session, failing the test on
// any answer but 200.
func consoleSession(t *testing.T, e *env, role string) func(path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		t.Helper()
		res, err := web.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, res.StatusCode)
		}
		return string(b)
	}
	m := consoleCSRF.FindStringSubmatch(get("/console/signin"))
	if m == nil {
		t.Fatal("the sign-in page has no CSRF token")
	}
	res, err := web.PostForm(e.base+"/console/signin", url.Values{"csrf": {m[1]}, "key": {keys[role]}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in = %d", res.StatusCode)
	}
	return get
}

// The history's score chart reads on past a page cut by size: with pages
// of one report, the first page's chart still shows every monthly drill;
// a later page's shows its own.
func TestConsoleDrillChartReadsPastAPageCutBySize(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx := authCtx(context.Background(), "support")
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "A-5531"})), nil); code != 200 {
		t.Fatalf("receipt: %d", code)
	}
	const monthly = 3
	for range monthly {
		if _, err := c.RunDrill(ctx, &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	server.SetAnswerRowBytes(t, 1)
	get := consoleSession(t, e, "support")
	first := get("/console/drills")
	if n := strings.Count(first, `<circle class="dot`); n != monthly {
		t.Fatalf("the first page's chart shows %d drills, want %d", n, monthly)
	}
	older := consoleOlder.FindStringSubmatch(first)
	if older == nil {
		t.Fatal("the first page has no Older link")
	}
	if n := strings.Count(get(html.UnescapeString(older[1])), `<circle class="dot`); n != 1 {
		t.Fatalf("the second page's chart shows %d drills, want its own one", n)
	}
}
