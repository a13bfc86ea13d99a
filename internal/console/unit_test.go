package console

import (
	"bytes"
	"fmt"
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func TestScoreChart(t *testing.T) {
	rep := func(id string, passed, total int32, day int) *ledgerv1.DrillReport {
		return &ledgerv1.DrillReport{Id: id, ChecksPassed: passed, ChecksTotal: total, StartedAt: timestamppb.New(time.Date(2026, time.Month(day), 1, 3, 0, 0, 0, time.UTC))}
	}
	tests := []struct {
		name  string
		in    []*ledgerv1.DrillReport // newest first
		wantY []float64               // oldest first
		ids   []string
	}{
		{name: "none"},
		{name: "one perfect", in: []*ledgerv1.DrillReport{rep("a", 30, 30, 1)}, wantY: []float64{14}, ids: []string{"a"}},
		{name: "oldest on the left", in: []*ledgerv1.DrillReport{rep("new", 15, 30, 2), rep("old", 0, 30, 1)}, wantY: []float64{190, 102}, ids: []string{"old", "new"}},
		{name: "nothing run", in: []*ledgerv1.DrillReport{rep("z", 0, 0, 1)}, wantY: []float64{190}, ids: []string{"z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newScoreChart(tc.in)
			var ys []float64
			var ids []string
			for _, d := range c.Dots {
				ys, ids = append(ys, d.Y), append(ids, d.ID)
			}
			if !slices.Equal(ys, tc.wantY) {
				t.Errorf("y = %v, want %v", ys, tc.wantY)
			}
			if !slices.Equal(ids, tc.ids) {
				t.Errorf("order = %v, want %v", ids, tc.ids)
			}
		})
	}
	many := make([]*ledgerv1.DrillReport, 40)
	for i := range many {
		many[i] = rep("r", 30, 30, 1)
	}
	if n := len(newScoreChart(many).Dots); n != maxChartPoints {
		t.Errorf("%d points, want the newest %d", n, maxChartPoints)
	}
}

func TestCSVSafe(t *testing.T) {
	got := csvSafe([]string{"A-5531", "=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "", "acct 48213"})
	want := []string{"A-5531", "'=HYPERLINK(\"x\")", "'+1", "'-2", "'@SUM(A1)", "'\tx", "", "acct 48213"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCompareChecks(t *testing.T) {
	pass, fail := ledgerv1.CheckResult_CHECK_RESULT_PASS, ledgerv1.CheckResult_CHECK_RESULT_FAIL
	v := compareChecks(&ledgerv1.VerifyRowResponse{
		Checks:          []*ledgerv1.Check{{Name: "a", Result: pass}, {Name: "b", Result: fail}, {Name: "new", Result: pass}},
		WriteTimeChecks: []*ledgerv1.Check{{Name: "a", Result: pass}, {Name: "b", Result: pass}, {Name: "gone", Result: pass}},
	})
	var got []string
	for _, l := range v.Lines {
		mark := "same"
		if l.Differ {
			mark = "differs"
		}
		got = append(got, l.Name+" "+mark)
	}
	want := []string{"a same", "b differs", "new differs", "gone differs"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// A read-only row: its signatures are not re-run (their evidence is
	// not kept) and the API says the result is the same: not a difference.
	skipped := ledgerv1.CheckResult_CHECK_RESULT_SKIPPED
	v = compareChecks(&ledgerv1.VerifyRowResponse{Same: true,
		Checks:          []*ledgerv1.Check{{Name: "receipt_signature", Result: skipped, Detail: "read-only class: not kept"}, {Name: "scopes", Result: pass}},
		WriteTimeChecks: []*ledgerv1.Check{{Name: "receipt_signature", Result: pass}, {Name: "scopes", Result: pass}},
	})
	if l := v.Lines[0]; l.Differ || !l.NotRerun || v.Lines[1].Differ || v.Lines[1].NotRerun {
		t.Errorf("a read-only row's re-run: %+v", v.Lines)
	}
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := pages["row"].ExecuteTemplate(&buf, "layout.html", view{Data: rowView{Row: &ledgerv1.Row{Id: strings.Repeat("a", 64)}, Verify: v}}); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	s = s[strings.Index(s, `id="verify-result"`):]
	if strings.Contains(s, `class="differ"`) || !strings.Contains(s, "not re-run</span> read-only class: not kept") {
		t.Errorf("a read-only row's re-run:\n%s", s[:min(len(s), 2000)])
	}
}

// The search and grant links of a list of rows carry each value as it
// is: a link followed searches for the value shown, whatever characters
// it holds (a space, a plus, a slash, an ampersand, angle brackets).
func TestRowLinksCarryValuesAsTheyAre(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	row := &ledgerv1.Row{Id: strings.Repeat("a", 64), Principal: "acct 30418+x/y&z=<1>", GrantId: "grant +1/2 & 3",
		Actions: []*ledgerv1.RowAction{{Tool: "cancel_order", Target: "A-5531 +rush/2"}}}
	var buf bytes.Buffer
	if err := pages["search"].ExecuteTemplate(&buf, "rows", []*ledgerv1.Row{row}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"principal": row.Principal, "target": row.Actions[0].Target, "grant": row.GrantId}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`href="(/console/(?:search|grant)\?[^"]*)"`).FindAllStringSubmatch(buf.String(), -1) {
		u, err := url.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatalf("link %s: %v", m[1], err)
		}
		q := u.Query()
		if u.Path == "/console/grant" {
			got["grant"] = q.Get("id")
		} else {
			got[q.Get("by")] = q.Get("q")
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("the links carry %q, want %q\n%s", got, want, buf.String())
	}
}

// The drill a search by order offers is for the one customer of the
// order's receipts; a refusal's claimed customer is never chosen, and
// receipts of several customers leave the customer out.
func TestDrillOfferedForTheReceiptsCustomer(t *testing.T) {
	receipt := func(p string) *ledgerv1.Row {
		return &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT, Principal: p}
	}
	refusal := &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_REFUSAL, Principal: "sub jane of https://pa.example"}
	for _, tc := range []struct {
		rows []*ledgerv1.Row
		want string
	}{
		{[]*ledgerv1.Row{refusal, receipt("acct-48213"), receipt("acct-48213")}, "acct-48213"},
		{[]*ledgerv1.Row{receipt("acct-48213"), receipt("acct-1")}, ""},
		{[]*ledgerv1.Row{refusal}, ""},
	} {
		if got := drillPrincipal(tc.rows); got != tc.want {
			t.Errorf("drillPrincipal = %q, want %q", got, tc.want)
		}
	}
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rows := []*ledgerv1.Row{refusal, receipt("acct-48213")}
	for _, r := range rows {
		r.Id = strings.Repeat("a", 64)
	}
	v := view{Can: can{Drill: true}, Data: searchView{Form: searchForm{Q: "A-5531"}, Matched: "target", Rows: rows, DrillHint: true, DrillPrincipal: drillPrincipal(rows)}}
	if err := pages["search"].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, `<input type="hidden" name="principal" value="acct-48213">`) || strings.Contains(s, `name="principal" value="sub jane`) {
		t.Errorf("the drill offered:\n%s", s[strings.Index(s, `id="results"`):])
	}
}

// A drill report's page shows its note and the rows it found and did not
// score, offers each drilled row's proof, and says "nothing scored"
// rather than a failing 0/0.
func TestReportPageShowsNoteListedAndProofs(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	row, turn := strings.Repeat("a", 64), strings.Repeat("b", 64)
	render := func(rep *ledgerv1.DrillReport) string {
		var buf bytes.Buffer
		if err := pages["report"].ExecuteTemplate(&buf, "layout.html", view{Data: reportOf(rep)}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	s := render(&ledgerv1.DrillReport{Id: "d1", ChecksPassed: 1, ChecksTotal: 1, Note: "1 row drilled; 1 read-only turn listed, not scored",
		Pulls:  []*ledgerv1.DrillPull{{RowId: row, Name: "receipt_row", Passed: true}},
		Listed: []*ledgerv1.DrillListedRow{{RowId: turn, Detail: "read-only turn lookup_orders on A-5531"}}})
	for _, want := range []string{"1 row drilled; 1 read-only turn listed", `href="/console/rows/` + row + `/proof"`, `href="/console/rows/` + turn + `"`, "read-only turn lookup_orders on A-5531", "1/1 passed"} {
		if !strings.Contains(s, want) {
			t.Errorf("report page lacks %q", want)
		}
	}
	s = render(&ledgerv1.DrillReport{Id: "d2", Note: "nothing to drill: the 21 rows about A-5531 are read-only turns"})
	if !strings.Contains(s, "nothing scored") || strings.Contains(s, "0/0") || !strings.Contains(s, "nothing to drill: the 21 rows") || strings.Contains(s, "details-cut") {
		t.Errorf("a report that scored nothing:\n%s", s)
	}
	// An answer that cut details says so, and where the whole report is.
	s = render(&ledgerv1.DrillReport{Id: "d3", DetailsTruncated: true, Object: &ledgerv1.EvidenceObject{Key: "drills/d3.json"},
		Pulls: []*ledgerv1.DrillPull{{RowId: row, Name: "action_log", Detail: "logged x… (9000 bytes more)"}}})
	if !strings.Contains(s, `id="details-cut"`) || !strings.Contains(s, "drills/d3.json") || !strings.Contains(s, "logged x… (9000 bytes more)") {
		t.Errorf("a report whose details were cut:\n%s", s)
	}
	// The reply says a proof is attached only in the version offered for
	// sending with the rows' log proofs.
	s = render(&ledgerv1.DrillReport{Id: "d4", Reply: "Reply.", ReplyWithProof: "Reply. Attached is a proof file.", Pulls: []*ledgerv1.DrillPull{{RowId: row, Name: "receipt_row", Passed: true}}})
	if !strings.Contains(s, `<p id="reply" class="reply-text">Reply.</p>`) || !strings.Contains(s, `<p id="reply-with-proof" class="reply-text">Reply. Attached is a proof file.</p>`) || !strings.Contains(s, `data-copy="reply-with-proof"`) {
		t.Errorf("a report with a reply to send with proofs:\n%s", s)
	}
	if s = render(&ledgerv1.DrillReport{Id: "d5", Reply: "Reply."}); strings.Contains(s, "reply-with-proof") {
		t.Errorf("a report with no proof offers a reply with one:\n%s", s)
	}
}

// The empty states say what is true: no open incidents is "every action
// stayed within its grant" only when none was ever closed either, and a
// search that matched nothing says when its filters were part of it.
func TestEmptyStatesWording(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	render := func(page string, data any) string {
		var buf bytes.Buffer
		if err := pages[page].ExecuteTemplate(&buf, "layout.html", view{Data: data}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if s := render("incidents", incidentsView{State: "open", Closed: 1}); strings.Contains(s, "every recorded action stayed within its grant") {
		t.Errorf("no open incidents, one closed: says every action stayed within its grant")
	}
	if s := render("incidents", incidentsView{State: "open"}); !strings.Contains(s, "every recorded action stayed within its grant") {
		t.Errorf("no incidents at all: %s", s)
	}
	if s := render("search", searchView{Form: searchForm{Q: "A-5531", Status: "ROW_STATUS_UNAUTHORIZED"}, Filtered: true}); !strings.Contains(s, "as an order id, customer, grant or agent platform within the filters given") {
		t.Errorf("a search with a filter that matched nothing: %s", s)
	}
	if s := render("search", searchView{Form: searchForm{Q: "A-5531"}, Filtered: true}); strings.Contains(s, "filters given") {
		t.Errorf("a search without filters: %s", s)
	}
	// A page that read its bound of entries before it found a row: not
	// "nothing matches", and a link reads on.
	if s := render("search", searchView{Form: searchForm{Q: "A-5531", Principal: "acct-48213"}, Filtered: true, Matched: "target", Unread: true, Next: "/console/search?page=x"}); !strings.Contains(s, "No rows found yet") ||
		strings.Contains(s, "Nothing in the ledger matches") || !strings.Contains(s, `href="/console/search?page=x" id="next-page"`) {
		t.Errorf("a search whose page read its bound and found nothing yet: %s", s[strings.Index(s, `id="results"`):])
	}
}

// Only a page of the console is returned to after signing in.
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/console/rows/abc":             "/console/rows/abc",
		"/console/search?q=A-5531":      "/console/search?q=A-5531",
		"https://evil.example/console/": "",
		"//evil.example/console/":       "",
		"/console/\\evil":               "",
		"/consolex/":                    "",
		"/console/signin?next=x":        "",
		"/console/../metrics":           "",
		"":                              "",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// A list of rows shows each tool and target of a row once, marked where
// the writer alone gives the target in any action naming it, and at most
// maxActionLines of them with the count of the rest: a receipt naming
// one action 64 times takes one line, not 64.
func TestActionCellShowsEachActionOnce(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	repeated := &ledgerv1.Row{Id: strings.Repeat("a", 64), Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT}
	for i := range 64 {
		src := ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS
		if i == 40 {
			src = ledgerv1.TargetSource_TARGET_SOURCE_WRITER
		}
		repeated.Actions = append(repeated.Actions, &ledgerv1.RowAction{Tool: "cancel_order", Target: "A-5531", TargetSource: src})
	}
	many := &ledgerv1.Row{Id: strings.Repeat("b", 64), Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT}
	for i := range 8 {
		many.Actions = append(many.Actions, &ledgerv1.RowAction{Tool: "cancel_order", Target: fmt.Sprintf("A-%d", i)})
	}
	// The seventh's target is the writer's alone: it is among those shown.
	many.Actions[6].Target, many.Actions[6].TargetSource = "B-8888", ledgerv1.TargetSource_TARGET_SOURCE_WRITER
	var buf bytes.Buffer
	if err := pages["search"].ExecuteTemplate(&buf, "rows", []*ledgerv1.Row{repeated, many}); err != nil {
		t.Fatal(err)
	}
	s := html.UnescapeString(buf.String())
	rows := strings.Split(s[strings.Index(s, "<tbody>"):], "<tr>")[1:]
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), s)
	}
	if n := strings.Count(rows[0], ">A-5531</a>"); n != 1 || strings.Count(rows[0], "the writer's word alone") != 1 || strings.Contains(rows[0], "more") {
		t.Errorf("the row naming cancel_order A-5531 64 times shows it %d times, want once, marked:\n%s", n, rows[0])
	}
	if n := strings.Count(rows[1], ">A-") + strings.Count(rows[1], ">B-"); n != maxActionLines || !strings.Contains(rows[1], "and 3 more (the row lists them)") {
		t.Errorf("the row of 8 actions shows %d, want %d and \"and 3 more\":\n%s", n, maxActionLines, rows[1])
	}
	if !strings.Contains(rows[1], ">B-8888</a><span class=\"target-source writer\"") || strings.Contains(rows[1], ">A-4</a>") || strings.Contains(rows[1], "more the writer's word alone") {
		t.Errorf("the row of 8 actions does not show the target the writer alone gives among the first five:\n%s", rows[1])
	}
	// When more than five are the writer's alone, the count says so.
	for _, a := range many.Actions {
		a.TargetSource = ledgerv1.TargetSource_TARGET_SOURCE_WRITER
	}
	if v := actionCell(many); len(v.Lines) != maxActionLines || v.More != 3 || v.MoreWriterOnly != 3 {
		t.Errorf("all eight the writer's alone: %d lines, %d more, %d of them the writer's; want 5, 3, 3", len(v.Lines), v.More, v.MoreWriterOnly)
	}
}

// A row's writer-only targets in the grant export are each listed once,
// in the order of its actions, joined as its actions are.
func TestGrantExportListsEachWriterOnlyTargetOnce(t *testing.T) {
	r := &ledgerv1.Row{Id: "r", Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT, Actions: []*ledgerv1.RowAction{
		{Tool: "cancel_order", Target: "B-8888", TargetSource: ledgerv1.TargetSource_TARGET_SOURCE_WRITER, ArgsHashSource: ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_RECEIPT},
		{Tool: "issue_refund", Target: "B-8888", TargetSource: ledgerv1.TargetSource_TARGET_SOURCE_WRITER, ArgsHashSource: ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_RECEIPT},
		{Tool: "lookup_orders", Target: "A-5531", TargetSource: ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS},
		{Tool: "change_address", Target: "C-1", TargetSource: ledgerv1.TargetSource_TARGET_SOURCE_WRITER},
		{Tool: "lookup_orders", Target: "D-1"},
	}}
	g := grantOf(&ledgerv1.GetGrantResponse{GrantId: "g", Rows: []*ledgerv1.Row{r}})
	if got := g.Rows[0].WriterOnlyTargets; got != "B-8888; C-1" {
		t.Errorf("writer-only targets %q; want %q", got, "B-8888; C-1")
	}
}

// One key signing in again and again ends its own oldest sessions, past
// 20, and no one else's.
func TestOneKeyCannotPushOthersSessionsOut(t *testing.T) {
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	s := newSessions(time.Hour, 12*time.Hour, 100, func() time.Time { return now })
	other := s.create("auditor-key", Identity{Name: "auditor"})
	var first *session
	for i := range 1000 {
		now = now.Add(time.Millisecond)
		ss := s.create("support-key", Identity{Name: "support"})
		if i == 0 {
			first = ss
		}
	}
	if s.get(other.id) == nil {
		t.Fatal("another key's session ended after one key signed in 1,000 times")
	}
	if s.get(first.id) != nil {
		t.Fatal("the key's oldest session still lives past its bound")
	}
	mine := 0
	for _, v := range s.m {
		if v.key == "support-key" {
			mine++
		}
	}
	if mine != maxSessionsPerKey {
		t.Fatalf("the key holds %d sessions, want %d", mine, maxSessionsPerKey)
	}
}

// Answered by the ledgerd that runs the embedded Provider, the grant page
// says from when the revocation stops it, as that ledgerd says, and names
// no brand: another brand's statement may bear the same time.
func TestGrantOfTakesTheProvidersLedgerdsWord(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC))
	sts := []*ledgerv1.ProviderStatement{{Brand: "https://a-other.example/a2a/other", RevokedAt: at}, {Brand: "http://127.0.0.1:8090/a2a/acme", RevokedAt: at}}
	for _, tc := range []struct {
		name      string
		stoppedAt *timestamppb.Timestamp
		wantFirst bool
	}{
		{"stopped by its own statement", at, true},
		{"another brand's statement only", nil, false},
	} {
		rv := grantOf(&ledgerv1.GetGrantResponse{GrantId: "a2agrant_x", Revocation: &ledgerv1.Revocation{RevokedAt: at, By: "writer-key",
			ProviderStatements: sts, EmbeddedProvider: true, EmbeddedProviderStoppedAt: tc.stoppedAt}}).Revocation
		if !rv.ProviderKnown || rv.ProviderFirst != tc.wantFirst || rv.ProviderBrand != "" {
			t.Errorf("%s: %+v, want the Provider's ledgerd's word (stopped %v) and no brand named", tc.name, rv, tc.wantFirst)
		}
	}
}
