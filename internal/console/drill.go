package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// pullTargets are the playbook's target times for the six pulls (Step 6).
var pullTargets = map[string]string{
	"receipt_row": "2 min", "grant": "3 min", "action_log": "5 min",
	"agent_identity": "5 min", "reverify": "5 min", "decision": "10 min",
}

// pullTitles name the pulls in the playbook's words.
var pullTitles = map[string]string{
	"receipt_row": "Receipt row", "grant": "Grant", "action_log": "Action log",
	"agent_identity": "Agent identity", "reverify": "Verifier re-run", "decision": "Decision and reply",
}

type drillFormView struct {
	Target, Principal, Row string
	Error                  string
}

func (h *handler) drillForm(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := drillFormView{Target: bound(q.Get("target")), Principal: bound(q.Get("principal")), Row: bound(q.Get("row"))}
	h.render(w, r, s, http.StatusOK, "drill", "Dispute drill", v)
}

func bound(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxField {
		s = s[:maxField]
	}
	return s
}

// runDrill runs a dispute drill (or the monthly drill) with RunDrill and
// shows its report. Support and admin keys; the API refuses anyone else.
func (h *handler) runDrill(w http.ResponseWriter, r *http.Request, s *session) {
	f := r.PostForm
	v := drillFormView{Target: bound(f.Get("target")), Principal: bound(f.Get("principal")), Row: bound(f.Get("row"))}
	req := &ledgerv1.RunDrillRequest{Target: v.Target, Principal: v.Principal, RowId: v.Row}
	if f.Get("monthly") != "" {
		n, err := strconv.Atoi(f.Get("sample"))
		if err != nil || n < 1 || n > 100 {
			h.render(w, r, s, http.StatusBadRequest, "error", "Bad form", errorView{Title: "The drill did not run", Message: "The sample is a number of rows from 1 to 100.", Back: Prefix + "drills"})
			return
		}
		req = &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: int32(n)}}
	} else if v.Target == "" && v.Principal == "" && v.Row == "" {
		v.Error = "Name an order id (and the customer), or a row id."
		h.render(w, r, s, http.StatusBadRequest, "drill", "Dispute drill", v)
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.RunDrill(ctx, req)
	rep := resp.GetReport()
	h.audit(r, s, "run drill", err, slog.String("target", v.Target), slog.String("principal", v.Principal), slog.String("row", v.Row),
		slog.Bool("monthly", req.Monthly != nil), slog.String("drill", rep.GetId()), slog.String("score", fmt.Sprintf("%d/%d", rep.GetChecksPassed(), rep.GetChecksTotal())))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"drills/"+rep.GetId(), http.StatusSeeOther)
}

// reportView is a drill report as the page shows it.
type reportView struct {
	Report   *ledgerv1.DrillReport
	Rows     []pullGroup
	AllPass  bool
	Seconds  string
	Decision []string
}

// pullGroup is the six pulls of one row, with bars scaled to the slowest
// pull of the report.
type pullGroup struct {
	RowID string
	Pulls []pullBar
}

type pullBar struct {
	Name, Title, Target, Detail string
	Passed                      bool
	Ms                          float64
	Width                       float64 // 0 to 100
}

func reportOf(rep *ledgerv1.DrillReport) reportView {
	v := reportView{Report: rep, AllPass: rep.GetChecksTotal() > 0 && rep.GetChecksPassed() == rep.GetChecksTotal()}
	var slowest float64
	for _, p := range rep.GetPulls() {
		slowest = max(slowest, p.GetElapsedMs())
	}
	for _, p := range rep.GetPulls() {
		if len(v.Rows) == 0 || v.Rows[len(v.Rows)-1].RowID != p.GetRowId() {
			v.Rows = append(v.Rows, pullGroup{RowID: p.GetRowId()})
		}
		b := pullBar{Name: p.GetName(), Title: pullTitles[p.GetName()], Target: pullTargets[p.GetName()], Detail: p.GetDetail(), Passed: p.GetPassed(), Ms: p.GetElapsedMs()}
		if b.Title == "" {
			b.Title = p.GetName()
		}
		if slowest > 0 {
			b.Width = max(1, p.GetElapsedMs()*100/slowest)
		}
		g := &v.Rows[len(v.Rows)-1]
		g.Pulls = append(g.Pulls, b)
		if p.GetName() == "decision" && !slices.Contains(v.Decision, p.GetDetail()) {
			v.Decision = append(v.Decision, p.GetDetail())
		}
	}
	if a, b := rep.GetStartedAt(), rep.GetFinishedAt(); a != nil && b != nil {
		v.Seconds = strconv.FormatFloat(b.AsTime().Sub(a.AsTime()).Seconds(), 'f', 3, 64) + " s"
	}
	return v
}

var drillID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func (h *handler) drillReport(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !drillID.MatchString(id) {
		h.render(w, r, s, http.StatusNotFound, "error", "Not found", errorView{Title: "Not found", Message: "No drill report has that id.", Back: Prefix + "drills"})
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetDrill(ctx, &ledgerv1.GetDrillRequest{Id: id})
	h.audit(r, s, "view drill report", err, slog.String("drill", id))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	h.render(w, r, s, http.StatusOK, "report", "Drill "+id, reportOf(resp.GetReport()))
}

// drillsView is the drill history: the monthly scores chart and a page of
// reports.
type drillsView struct {
	Reports []*ledgerv1.DrillReport
	Chart   scoreChart
	Next    string
	First   string
}

// historyPage is how many reports the history page reads.
const historyPage = 200

// chartPages is how many more pages the first history page reads for its
// chart: the ledger ends a page before its reports pass 2 MiB, a few
// dozen monthly reports of 100 rows.
const chartPages = 8

// chartReports returns the monthly reports the chart shows, newest first:
// those of the page shown; and, on the first page, those of the pages
// after it until the chart has its points (maxChartPoints) or chartPages
// more pages were read, so that the chart does not shrink to what one
// page holds. A page that cannot be read ends the chart there.
func (h *handler) chartReports(ctx context.Context, tok string, resp *ledgerv1.ListDrillsResponse) []*ledgerv1.DrillReport {
	var monthly []*ledgerv1.DrillReport
	for pages := 0; ; pages++ {
		for _, rep := range resp.GetReports() {
			if rep.GetKind() == ledgerv1.DrillKind_DRILL_KIND_MONTHLY {
				monthly = append(monthly, rep)
			}
		}
		next := resp.GetNextPageToken()
		if tok != "" || next == "" || len(monthly) >= maxChartPoints || pages == chartPages {
			return monthly
		}
		var err error
		if resp, err = h.api.ListDrills(ctx, &ledgerv1.ListDrillsRequest{PageSize: historyPage, PageToken: next}); err != nil {
			return monthly
		}
	}
}

func (h *handler) drills(w http.ResponseWriter, r *http.Request, s *session) {
	tok := bound(r.URL.Query().Get("page"))
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.ListDrills(ctx, &ledgerv1.ListDrillsRequest{PageSize: historyPage, PageToken: tok})
	h.audit(r, s, "view drill history", err)
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	v := drillsView{Reports: resp.GetReports()}
	v.Chart = newScoreChart(h.chartReports(ctx, tok, resp))
	if t := resp.GetNextPageToken(); t != "" {
		v.Next = Prefix + "drills?page=" + urlQuery(t)
	}
	if tok != "" {
		v.First = Prefix + "drills"
	}
	h.render(w, r, s, http.StatusOK, "drills", "Drills", v)
}
