package console

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pactledger/pactledger/internal/rowtext"
	"github.com/pactledger/pactledger/internal/termtext"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// grantRow is one row of the grant page. The table, the CSV and the JSON
// export are all made from these values, so an export holds exactly what
// the page shows.
type grantRow struct {
	ID          string `json:"rowId"`
	Status      string `json:"status"`
	IssuedAt    string `json:"issuedAt"`
	Principal   string `json:"principal"`
	Agent       string `json:"agentPlatform"`
	Actions     string `json:"actions"`
	ScopesUsed  string `json:"scopesUsed"`
	Retention   string `json:"retentionClass"`
	RetainUntil string `json:"retainUntil"`
	Dispute     string `json:"disputeStatus"`
	// WriterOnlyTargets are the targets of Actions that are the writer's
	// word alone (no signed args name them), each once, joined as Actions
	// is: the ones the page marks.
	WriterOnlyTargets string `json:"writerOnlyTargets"`
	// AgentClaimed: no signature vouches for Agent, the writer's word (a
	// refusal's claimed platform, or a receipt's whose signature failed:
	// rowtext.ClaimedAgent); the page marks it "claimed".
	AgentClaimed bool `json:"agentClaimed"`
	// PrincipalClaimed: no signature vouches for Principal, a receipt's
	// whose signature failed (rowtext.ClaimedPrincipal); the page marks
	// it "claimed".
	PrincipalClaimed bool `json:"principalClaimed"`
	// Acts are the actions Actions lists, one each, for the page, which
	// marks a target that is the writer's word alone after it.
	Acts []grantAction `json:"-"`
}

// grantAction is one action of a grant page's row: its tool and target
// as Actions lists them, and what vouches for the target.
type grantAction struct {
	Text   string
	Target string
	Source targetSourceView
}

// grantColumns are the CSV header, in the order of grantRow's fields.
var grantColumns = []string{"rowId", "status", "issuedAt", "principal", "agentPlatform", "actions", "scopesUsed", "retentionClass", "retainUntil", "disputeStatus", "writerOnlyTargets", "agentClaimed", "principalClaimed"}

func (g grantRow) record() []string {
	return []string{g.ID, g.Status, g.IssuedAt, g.Principal, g.Agent, g.Actions, g.ScopesUsed, g.Retention, g.RetainUntil, g.Dispute, g.WriterOnlyTargets, strconv.FormatBool(g.AgentClaimed), strconv.FormatBool(g.PrincipalClaimed)}
}

// grantExport is the JSON export: the grant's facts and its rows as shown.
type grantExport struct {
	GrantID       string      `json:"grantId"`
	Principals    []string    `json:"principals"`
	Agents        []string    `json:"agents"`
	ScopesGranted []string    `json:"scopesGranted"`
	ScopesUsed    []string    `json:"scopesUsed"`
	Revocation    *revocation `json:"revocation"`
	RowCount      int32       `json:"rowCount"`
	// RowCountTruncated: the grant has more rows than the newest RowCount
	// the ledger read for one answer (GetGrant's row_count_truncated).
	RowCountTruncated bool `json:"rowCountTruncated"`
	// RowsTruncated: Rows holds fewer rows than RowCount (GetGrant's
	// rows_truncated): the export is not all of the grant's rows.
	RowsTruncated bool `json:"rowsTruncated"`
	// ListsTruncated: a value may have been left out of Principals,
	// Agents, ScopesGranted or ScopesUsed (GetGrant's lists_truncated):
	// a list passed what one answer carries, or, with RowCountTruncated,
	// rows not read may name more.
	ListsTruncated bool       `json:"listsTruncated"`
	Rows           []grantRow `json:"rows"`
}

// RowsCut reports whether Rows holds fewer rows than the grant has.
func (g *grantExport) RowsCut() bool { return g.RowsTruncated || g.RowCountTruncated }

type revocation struct {
	RevokedAt  string `json:"revokedAt"`
	By         string `json:"by"`
	Note       string `json:"note"`
	RecordedAt string `json:"recordedAt"`
	// AdminRevokedAt: from when the embedded Provider serves no request
	// under the grant (an admin's revocation); "" when none stops it.
	AdminRevokedAt string `json:"adminRevokedAt,omitempty"`
	// AdminBy, AdminNote, AdminRecordedAt: the admin's own record of the
	// revocation AdminRevokedAt is from, kept beside the one in force
	// (By and Note), which may be a writer's; "" for none, or for a
	// revocation recorded before the ledger kept them.
	AdminBy         string `json:"adminBy,omitempty"`
	AdminNote       string `json:"adminNote,omitempty"`
	AdminRecordedAt string `json:"adminRecordedAt,omitempty"`
	// ProviderRevokedAt, ProviderBrand: the earliest revocation a brand's
	// Provider signed and reported, which stops the embedded Provider
	// when the Provider is its own (docs/design/045); "" for none.
	ProviderRevokedAt string `json:"providerRevokedAt,omitempty"`
	ProviderBrand     string `json:"providerBrand,omitempty"`
	// ProviderFirst: the Provider's own revocation is from before an
	// admin's, or there is no admin's.
	ProviderFirst bool `json:"-"`
	// ProviderKnown: the ledgerd that answered runs the embedded Provider
	// and said whether the revocation stops it; the statement shown, if
	// any, is then one of its own.
	ProviderKnown bool `json:"-"`
}

// earliestStatement is the earliest of rv's Provider statements, nil
// when it holds none.
func earliestStatement(rv *ledgerv1.Revocation) *ledgerv1.ProviderStatement {
	var first *ledgerv1.ProviderStatement
	for _, st := range rv.GetProviderStatements() {
		if first == nil || st.GetRevokedAt().AsTime().Before(first.GetRevokedAt().AsTime()) {
			first = st
		}
	}
	return first
}

type grantView struct {
	Query  string
	Grant  *grantExport
	Shown  int
	Export string // the export URL without format
}

func grantOf(g *ledgerv1.GetGrantResponse) *grantExport {
	out := &grantExport{GrantID: g.GetGrantId(), Principals: g.GetPrincipals(), Agents: g.GetAgents(), ScopesGranted: g.GetScopesGranted(),
		ScopesUsed: g.GetScopesUsed(), RowCount: g.GetRowCount(), RowCountTruncated: g.GetRowCountTruncated(), RowsTruncated: g.GetRowsTruncated(),
		ListsTruncated: g.GetListsTruncated(), Rows: []grantRow{}}
	if rv := g.GetRevocation(); rv != nil {
		out.Revocation = &revocation{RevokedAt: pbStamp(rv.GetRevokedAt()).ISO, By: rv.GetBy(), Note: rv.GetNote(), RecordedAt: pbStamp(rv.GetRecordedAt()).ISO}
		if at := rv.GetAdminRevokedAt(); at != nil {
			out.Revocation.AdminRevokedAt = pbStamp(at).ISO
			out.Revocation.AdminBy, out.Revocation.AdminNote = rv.GetAdminBy(), rv.GetAdminNote()
			out.Revocation.AdminRecordedAt = pbStamp(rv.GetAdminRecordedAt()).ISO
		}
		admin := rv.GetAdminRevokedAt()
		if rv.GetEmbeddedProvider() {
			// The ledgerd that answered runs it and says from when the
			// revocation stops it; which statement is its own it does
			// not say (another brand's may bear the same time), so the
			// page names none.
			out.Revocation.ProviderKnown = true
			if at := rv.GetEmbeddedProviderStoppedAt(); at != nil && (admin == nil || at.AsTime().Before(admin.AsTime())) {
				out.Revocation.ProviderRevokedAt, out.Revocation.ProviderFirst = pbStamp(at).ISO, true
			}
		} else if st := earliestStatement(rv); st != nil {
			at := st.GetRevokedAt()
			out.Revocation.ProviderRevokedAt, out.Revocation.ProviderBrand = pbStamp(at).ISO, st.GetBrand()
			out.Revocation.ProviderFirst = admin == nil || at.AsTime().Before(admin.AsTime())
		}
	}
	for _, r := range g.GetRows() {
		var acts, writerOnly []string
		var shown []grantAction
		for _, a := range r.GetActions() {
			acts = append(acts, strings.TrimSpace(a.GetTool()+" "+a.GetTarget()))
			src := targetSource(r, a)
			shown = append(shown, grantAction{Text: acts[len(acts)-1], Target: a.GetTarget(), Source: src})
			if src.WriterOnly && !slices.Contains(writerOnly, a.GetTarget()) {
				writerOnly = append(writerOnly, a.GetTarget())
			}
		}
		until := pbStamp(r.GetRetainUntil()).ISO
		if until == "" && r.GetIncidentId() != "" {
			until = "held: incident " + r.GetIncidentId() + " open"
		}
		out.Rows = append(out.Rows, grantRow{ID: r.GetId(), Status: label(r.GetStatus(), "ROW_STATUS_"), IssuedAt: pbStamp(r.GetIssuedAt()).ISO,
			Principal: r.GetPrincipal(), Agent: r.GetAgent().GetPlatform(), Actions: strings.Join(acts, "; "), ScopesUsed: strings.Join(r.GetScopesUsed(), " "),
			Retention: label(r.GetRetentionClass(), "RETENTION_CLASS_"), RetainUntil: until, Dispute: label(r.GetDisputeStatus(), "DISPUTE_STATUS_"),
			WriterOnlyTargets: strings.Join(writerOnly, "; "), AgentClaimed: rowtext.ClaimedAgent(r),
			PrincipalClaimed: rowtext.ClaimedPrincipal(r), Acts: shown})
	}
	return out
}

func (h *handler) loadGrant(w http.ResponseWriter, r *http.Request, s *session, action string) (string, *grantExport, bool) {
	id := bound(r.URL.Query().Get("id"))
	if id == "" {
		return "", nil, true
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetGrant(ctx, &ledgerv1.GetGrantRequest{GrantId: id})
	h.audit(r, s, action, err, slog.String("grant", id), slog.Int("rows", len(resp.GetRows())))
	if err != nil {
		h.apiError(w, r, s, err)
		return id, nil, false
	}
	return id, grantOf(resp), true
}

// grant is the auditor's view of a grant (GetGrant): every row under it
// and its revocation.
func (h *handler) grant(w http.ResponseWriter, r *http.Request, s *session) {
	id, g, ok := h.loadGrant(w, r, s, "view grant")
	if !ok {
		return
	}
	v := grantView{Query: id, Grant: g}
	if g != nil {
		v.Shown = len(g.Rows)
		v.Export = Prefix + "grant/export?id=" + urlQuery(id)
	}
	h.render(w, r, s, http.StatusOK, "grant", "Grant", v)
}

// grantExport downloads the grant page's rows as CSV or JSON.
func (h *handler) grantExport(w http.ResponseWriter, r *http.Request, s *session) {
	format := r.URL.Query().Get("format")
	if format != "csv" && format != "json" {
		h.render(w, r, s, http.StatusBadRequest, "error", "Bad export", errorView{Title: "Bad export", Message: "Export as csv or json."})
		return
	}
	id, g, ok := h.loadGrant(w, r, s, "export grant "+format)
	if !ok {
		return
	}
	if g == nil {
		h.render(w, r, s, http.StatusBadRequest, "error", "Bad export", errorView{Title: "Bad export", Message: "Name a grant id."})
		return
	}
	if format == "csv" && g.RowsCut() {
		// A CSV file has no place to say it holds part of the grant's
		// rows: a comment line is not CSV, and a spreadsheet or a
		// program would read the file as all of them.
		h.render(w, r, s, http.StatusConflict, "error", "No CSV export", errorView{Title: "No CSV export of this grant",
			Message: csvCutMessage(id, g), Back: Prefix + "grant?id=" + urlQuery(id)})
		return
	}
	var buf bytes.Buffer
	switch format {
	case "csv":
		cw := csv.NewWriter(&buf)
		_ = cw.Write(grantColumns)
		for _, row := range g.Rows {
			_ = cw.Write(csvSafe(row.record()))
		}
		cw.Flush()
		download(w, "grant-"+id+".csv", "text/csv; charset=utf-8", buf.Bytes())
	default:
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(g); err != nil {
			h.apiError(w, r, s, err)
			return
		}
		download(w, "grant-"+id+".json", "application/json", buf.Bytes())
	}
}

// csvCutMessage says why a grant whose rows an answer cuts has no CSV
// export, and where every row is.
func csvCutMessage(id string, g *grantExport) string {
	of := strconv.Itoa(int(g.RowCount))
	if g.RowCountTruncated {
		of = "more than " + of
	}
	return "This grant has " + of + " rows and one export holds the newest " + strconv.Itoa(len(g.Rows)) +
		", and a CSV file has no place to say it is cut short. Export JSON, which says so, or list every row with: ledgerctl lookup --grant " +
		id + " --all --output csv"
}

// csvSafe keeps a spreadsheet from reading a cell as a formula: a cell a
// writer controls (a target, a principal) that a spreadsheet could read
// as one, or could split into parts one of which it could, gets an
// apostrophe before each (termtext.CSVCell; OWASP's CSV injection
// advice).
func csvSafe(rec []string) []string {
	for i, c := range rec {
		rec[i] = termtext.CSVCell(c)
	}
	return rec
}
