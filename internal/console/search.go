package console

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// searchForm is the search page's query: one free box (an order id, a
// customer, a grant or an agent platform) and the API's filters.
type searchForm struct {
	Q         string
	By        string // what Q is: "" (try each), target, principal, grant, agent
	Principal string
	Grant     string
	Target    string
	Agent     string
	Status    string // RowStatus name
	Since     string // YYYY-MM-DD, UTC
	Until     string // YYYY-MM-DD, UTC, inclusive
	Page      string
}

type searchView struct {
	Form     searchForm
	Statuses []ledgerv1.RowStatus // the filter's choices, shown in words
	Rows     []*ledgerv1.Row
	Matched  string // what Q matched as
	Filtered bool   // any filter given (else: recent rows)
	Next     string // URL of the next page
	// Unread: no row found yet, and more of the index left to read (each
	// page of ListRows reads a bounded number of entries).
	Unread    bool
	First     string // URL of the first page when paging
	Error     string
	DrillHint bool // Q matched as an order: offer the drill
	// DrillPrincipal is the customer the offered drill is for: the one
	// customer of the order's receipts, "" (every customer's rows) when
	// they name several or none.
	DrillPrincipal string
}

// Narrowed reports whether the search had filters beside the box.
func (v searchView) Narrowed() bool {
	f := v.Form
	return f.Principal != "" || f.Grant != "" || f.Target != "" || f.Agent != "" || f.Status != "" || f.Since != "" || f.Until != ""
}

// drillPrincipal is the customer of rows' receipts when they name one.
// A refusal's customer is a claim and never chosen.
func drillPrincipal(rows []*ledgerv1.Row) string {
	p := ""
	for _, r := range rows {
		if r.GetKind() != ledgerv1.RowKind_ROW_KIND_RECEIPT {
			continue
		}
		if p != "" && r.GetPrincipal() != p {
			return ""
		}
		p = r.GetPrincipal()
	}
	return p
}

var rowID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// rowRef is how a lead may name a row: its id, or the first 8 or more of
// its hex digits (the tables print 12), in either case.
var rowRef = regexp.MustCompile(`^[0-9a-fA-F]{8,64}$`)

// byOrder is the order Q is tried in when By is empty.
var byOrder = []string{"target", "principal", "grant", "agent"}

func (f searchForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": f.Q, "by": f.By, "principal": f.Principal, "grant": f.Grant, "target": f.Target,
		"agent": f.Agent, "status": f.Status, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (h *handler) search(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := searchForm{Q: q.Get("q"), By: q.Get("by"), Principal: q.Get("principal"), Grant: q.Get("grant"), Target: q.Get("target"),
		Agent: q.Get("agent"), Status: q.Get("status"), Since: q.Get("since"), Until: q.Get("until"), Page: q.Get("page")}
	for _, p := range []*string{&f.Q, &f.By, &f.Principal, &f.Grant, &f.Target, &f.Agent, &f.Status, &f.Since, &f.Until, &f.Page} {
		*p = strings.TrimSpace(*p)
		if len(*p) > maxField {
			*p = (*p)[:maxField]
		}
	}
	v := searchView{Form: f}
	for i := int32(1); i < int32(len(ledgerv1.RowStatus_name)); i++ {
		v.Statuses = append(v.Statuses, ledgerv1.RowStatus(i))
	}
	if rowID.MatchString(strings.ToLower(f.Q)) {
		http.Redirect(w, r, Prefix+"rows/"+strings.ToLower(f.Q), http.StatusSeeOther)
		return
	}
	req := &ledgerv1.ListRowsRequest{Principal: f.Principal, GrantId: f.Grant, Target: f.Target, Agent: f.Agent, PageSize: searchPage, PageToken: f.Page}
	if f.Status != "" {
		st, ok := ledgerv1.RowStatus_value[f.Status]
		if !ok {
			v.Error = "Unknown status."
		}
		req.Status = ledgerv1.RowStatus(st)
	}
	var err error
	if req.Since, err = day(f.Since, 0); err != nil {
		v.Error = "From: " + err.Error()
	}
	if req.Until, err = day(f.Until, 1); err != nil {
		v.Error = "To: " + err.Error()
	}
	v.Filtered = f.Q != "" || f.Principal != "" || f.Grant != "" || f.Target != "" || f.Agent != "" || f.Status != "" || f.Since != "" || f.Until != ""
	if v.Error != "" {
		h.render(w, r, s, http.StatusBadRequest, "search", "Search", v)
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	tries := []string{""}
	if f.Q != "" {
		tries = byOrder
		if f.By != "" {
			tries = []string{f.By}
		}
	}
	var resp *ledgerv1.ListRowsResponse
	for _, by := range tries {
		rq := proto(req)
		switch by {
		case "target":
			rq.Target = f.Q
		case "principal":
			rq.Principal = f.Q
		case "grant":
			rq.GrantId = f.Q
		case "agent":
			rq.Agent = f.Q
		case "":
		default:
			v.Error = "Unknown kind of search."
			h.render(w, r, s, http.StatusBadRequest, "search", "Search", v)
			return
		}
		resp, err = h.api.ListRows(ctx, rq)
		// A page that read its bound of index entries before it found a
		// row comes back empty with a token: follow it a few pages, and
		// then offer the rest on the next page.
		for n := 1; err == nil && len(resp.GetRows()) == 0 && resp.GetNextPageToken() != "" && n < searchEmptyPages; n++ {
			rq.PageToken = resp.GetNextPageToken()
			resp, err = h.api.ListRows(ctx, rq)
		}
		if err != nil {
			break
		}
		v.Matched = by
		if len(resp.GetRows()) > 0 || resp.GetNextPageToken() != "" {
			break
		}
	}
	h.audit(r, s, "search", err, slog.String("q", f.Q), slog.String("matched", v.Matched), slog.String("filters", filterNames(f)))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	v.Rows = resp.GetRows()
	v.Unread = len(v.Rows) == 0 && resp.GetNextPageToken() != ""
	if f.Q != "" && len(v.Rows) == 0 && !v.Unread && f.By == "" && f.Page == "" && rowRef.MatchString(f.Q) {
		// Nothing else by that name: the start of a row id, as tables
		// print them.
		if row, err := h.api.GetRow(ctx, &ledgerv1.GetRowRequest{Id: strings.ToLower(f.Q)}); err == nil {
			http.Redirect(w, r, Prefix+"rows/"+row.GetRow().GetId(), http.StatusSeeOther)
			return
		}
	}
	if f.Q != "" && len(v.Rows) == 0 && !v.Unread {
		v.Matched = ""
	}
	v.DrillHint = v.Matched == "target" && len(v.Rows) > 0
	if v.DrillHint {
		v.DrillPrincipal = drillPrincipal(v.Rows)
	}
	if t := resp.GetNextPageToken(); t != "" {
		nf := f
		nf.By, nf.Page = v.Matched, t
		vals := nf.values()
		vals.Set("page", t)
		v.Next = Prefix + "search?" + vals.Encode()
	}
	if f.Page != "" {
		ff := f
		ff.Page = ""
		v.First = Prefix + "search?" + ff.values().Encode()
	}
	h.render(w, r, s, http.StatusOK, "search", "Search", v)
}

// proto copies a ListRowsRequest.
func proto(r *ledgerv1.ListRowsRequest) *ledgerv1.ListRowsRequest {
	return &ledgerv1.ListRowsRequest{Principal: r.Principal, GrantId: r.GrantId, Target: r.Target, Agent: r.Agent, Status: r.Status,
		RetentionClass: r.RetentionClass, Since: r.Since, Until: r.Until, PageSize: r.PageSize, PageToken: r.PageToken}
}

func filterNames(f searchForm) string {
	var n []string
	for k := range f.values() {
		n = append(n, k)
	}
	slices.Sort(n)
	return strings.Join(n, ",")
}

// day parses a YYYY-MM-DD date as midnight UTC, plus add days; "" is none.
func day(s string, add int) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return nil, errors.New("write the date as YYYY-MM-DD")
	}
	return timestamppb.New(t.AddDate(0, 0, add)), nil
}
