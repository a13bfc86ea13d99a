package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/rowtext"
	"github.com/pactledger/pactledger/internal/termtext"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// view is what every page template receives.
type view struct {
	Title string
	Nav   string // the active section
	Who   Identity
	Can   can
	CSRF  string
	Data  any
}

// errorView is the data of the error page.
type errorView struct {
	Title   string
	Message string
	Detail  string
	Back    string
}

// pageNav maps a template to the navigation section it belongs to.
var pageNav = map[string]string{
	"search": "search", "row": "search", "expired": "search", "evidence-differs": "search",
	"drill": "drill", "report": "drills", "drills": "drills",
	"grant": "grant", "incidents": "incidents", "incident": "incidents",
}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(files, n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page name inside the layout with status code.
func (h *handler) render(w http.ResponseWriter, r *http.Request, s *session, code int, name, title string, data any) {
	v := view{Title: title, Nav: pageNav[name], Data: data}
	if s != nil {
		v.Who, v.Can, v.CSRF = s.who, s.who.can(), s.csrf
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.log.ErrorContext(r.Context(), "console: render", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "the page could not be rendered; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	// A writer's words on the page (a row recorded before the ledger
	// refused control and invisible characters in them; a signed claim)
	// are shown as the record holds them: a bidirectional override
	// cannot reorder a cell, an invisible character cannot make one order
	// id look like another. html/template escapes markup, not these; the
	// pages' own text holds none.
	_, _ = io.WriteString(w, termtext.EscapeMarkup(buf.String()))
}

// backFrom is where an error page's "Go back" leads from the page of r:
// the form or list the request came from, a row's page from anything
// done to the row, else Search.
func backFrom(r *http.Request) string {
	p := r.URL.Path
	for _, section := range []string{"grant", "drills", "drill", "incidents"} {
		if p == Prefix+section || strings.HasPrefix(p, Prefix+section+"/") {
			return Prefix + section
		}
	}
	if id := r.PathValue("id"); strings.HasPrefix(p, Prefix+"rows/") && rowID.MatchString(id) && p != Prefix+"rows/"+id {
		return Prefix + "rows/" + id
	}
	return Prefix + "search"
}

// apiError renders the page for a refused or failed API call. An unknown
// key (removed from the configuration since sign-in) ends the session.
func (h *handler) apiError(w http.ResponseWriter, r *http.Request, s *session, err error) {
	st := status.Convert(err)
	v := errorView{Detail: st.Message(), Back: backFrom(r)}
	code := http.StatusBadGateway
	switch st.Code() {
	case codes.Unauthenticated:
		h.sess.end(s.id)
		h.setCookie(w, r, sessionCookie, "", -1)
		code, v.Title, v.Message, v.Back = http.StatusUnauthorized, "Signed out", "The ledger no longer accepts your key. Sign in again with a current key.", Prefix+"signin"
	case codes.PermissionDenied:
		code, v.Title = http.StatusForbidden, "Not allowed for your key"
		v.Message = fmt.Sprintf("The ledger refused this for key %s (%s). Nothing was changed.", s.who.Name, strings.Join(s.who.Roles, ", "))
	case codes.NotFound:
		code, v.Title, v.Message = http.StatusNotFound, "Not found", "The ledger has no such record."
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		code, v.Title, v.Message = http.StatusBadRequest, "The ledger did not accept that", "Check the values and try again."
	case codes.Unavailable, codes.ResourceExhausted:
		code, v.Title, v.Message = http.StatusServiceUnavailable, "The ledger is busy", "A store is unavailable or the ledger is shutting down. Try again in a moment."
	case codes.DeadlineExceeded, codes.Canceled:
		code, v.Title, v.Message = http.StatusGatewayTimeout, "The ledger took too long", "Try again; if it keeps happening, tell an operator."
	default:
		v.Title, v.Message = "The ledger could not answer", "An operator can find the details in the server log."
	}
	h.render(w, r, s, code, "error", v.Title, v)
}

// outcome names an error for the log: the gRPC code, never its text.
func outcome(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String()
	}
	return err.Error()
}

// apiMessage is the API's message for err.
func apiMessage(err error) string {
	return status.Convert(err).Message()
}

// expiry is what a 410 (a row removed by the retention sweeper) says.
type expiry struct {
	ID          string
	Class       string
	RetainUntil stamp
	SweptAt     stamp
	Message     string
}

// expired reports whether err says the row was swept by retention.
func expired(err error) (expiry, bool) {
	st := status.Convert(err)
	if st.Code() != codes.NotFound {
		return expiry{}, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "ROW_EXPIRED" {
			md := info.GetMetadata()
			return expiry{Class: strings.ReplaceAll(md["retentionClass"], "_", " "), RetainUntil: parseStamp(md["retainUntil"]),
				SweptAt: parseStamp(md["sweptAt"]), Message: st.Message()}, true
		}
	}
	return expiry{}, false
}

// stamp is a time as the pages show it: UTC text, and ISO for the script
// that adds the viewer's local time.
type stamp struct {
	ISO   string
	UTC   string // date and time of day
	Date  string
	Clock string // time of day, "15:04:05 UTC"
}

func mkStamp(t time.Time) stamp {
	if t.IsZero() {
		return stamp{}
	}
	t = t.UTC()
	return stamp{ISO: t.Format(time.RFC3339), UTC: t.Format("2006-01-02 15:04:05") + " UTC", Date: t.Format("2006-01-02"), Clock: t.Format("15:04:05") + " UTC"}
}

func parseStamp(s string) stamp {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return stamp{UTC: s}
	}
	return mkStamp(t)
}

func pbStamp(t *timestamppb.Timestamp) stamp {
	if t == nil {
		return stamp{}
	}
	return mkStamp(t.AsTime())
}

// label turns an enum name into words: ROW_STATUS_INCIDENT -> incident.
func label(enum fmt.Stringer, prefix string) string {
	s := strings.TrimPrefix(enum.String(), prefix)
	return strings.ToLower(strings.ReplaceAll(s, "_", " "))
}

var funcs = template.FuncMap{
	"ts":              pbStamp,
	"parseTS":         parseStamp,
	"status":          func(e fmt.Stringer) string { return label(e, "ROW_STATUS_") },
	"result":          func(e fmt.Stringer) string { return label(e, "CHECK_RESULT_") },
	"class":           func(e fmt.Stringer) string { return label(e, "RETENTION_CLASS_") },
	"dstat":           func(e fmt.Stringer) string { return label(e, "DISPUTE_STATUS_") },
	"kind":            func(e fmt.Stringer) string { return label(e, "DRILL_KIND_") },
	"rkind":           func(e fmt.Stringer) string { return label(e, "ROW_KIND_") },
	"hsrc":            func(e fmt.Stringer) string { return label(e, "ARGS_HASH_SOURCE_") },
	"tsrc":            targetSource,
	"claimed":         rowtext.ClaimedAgent,
	"claimedCustomer": rowtext.ClaimedPrincipal,
	"acts":            actionCell,
	"badge":           badge,
	"join":            strings.Join,
	"short":           short,
	"ms":              func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + " ms" },
	"pct": func(a, b int32) string {
		if b == 0 {
			return "—"
		}
		return strconv.Itoa(int(a*100/b)) + "%"
	},
	"notIn": func(s string, set []string) bool {
		for _, x := range set {
			if x == s {
				return false
			}
		}
		return true
	},
}

// targetSourceView is what vouches for an action's target, in words, and
// whether the target is the writer's word alone.
type targetSourceView struct {
	Words      string
	WriterOnly bool
}

// targetSource says what vouches for the target of action a of row r, as
// ledgerctl show says it.
func targetSource(r *ledgerv1.Row, a *ledgerv1.RowAction) targetSourceView {
	words, writerOnly := rowtext.TargetSource(r, a)
	return targetSourceView{Words: words, WriterOnly: writerOnly}
}

// actionLine is one line of a table's action cell: a tool and target,
// and what vouches for the target.
type actionLine struct {
	Tool, Target string
	Source       targetSourceView
}

// actionCellView is a table's action cell: its lines, and how many more
// the row names than it shows (MoreWriterOnly of them with a target that
// is the writer's word alone).
type actionCellView struct {
	Lines          []actionLine
	More           int
	MoreWriterOnly int
}

// maxActionLines bounds the lines of a table's action cell: a receipt
// may name many actions, and the row page lists every one.
const maxActionLines = 5

// actionCell is the action cell of row r in a table of rows: each tool
// and target once (a receipt that names one action many times takes one
// line), marked where the target is the writer's word alone in any of
// them, up to maxActionLines, those marked shown first, in the row's
// order, and the count of the rest.
func actionCell(r *ledgerv1.Row) actionCellView {
	var all []actionLine
	seen := map[[2]string]int{}
	for _, a := range r.GetActions() {
		k := [2]string{a.GetTool(), a.GetTarget()}
		src := targetSource(r, a)
		if i, ok := seen[k]; ok {
			if src.WriterOnly {
				all[i].Source = src
			}
			continue
		}
		seen[k] = len(all)
		all = append(all, actionLine{Tool: k[0], Target: k[1], Source: src})
	}
	if len(all) <= maxActionLines {
		return actionCellView{Lines: all}
	}
	shown := make([]bool, len(all))
	n := 0
	for _, writerOnly := range []bool{true, false} {
		for i, l := range all {
			if n < maxActionLines && !shown[i] && l.Source.WriterOnly == writerOnly {
				shown[i] = true
				n++
			}
		}
	}
	var v actionCellView
	for i, l := range all {
		switch {
		case shown[i]:
			v.Lines = append(v.Lines, l)
		case l.Source.WriterOnly:
			v.More++
			v.MoreWriterOnly++
		default:
			v.More++
		}
	}
	return v
}

// badge is the CSS class of a status, check result or dispute state.
func badge(e fmt.Stringer) string {
	s := e.String()
	switch {
	case strings.HasSuffix(s, "_AUTHORIZED") && !strings.HasSuffix(s, "_UNAUTHORIZED"), strings.HasSuffix(s, "_PASS"):
		return "ok"
	case strings.HasSuffix(s, "_UNAUTHORIZED"), strings.HasSuffix(s, "_INCIDENT"), strings.HasSuffix(s, "_FAIL"):
		return "bad"
	case strings.HasSuffix(s, "_DUPLICATE"), strings.HasSuffix(s, "_SKIPPED"), strings.HasSuffix(s, "_OPEN"):
		return "warn"
	}
	return "plain"
}

// short abbreviates a long id for a table cell.
func short(id string) string {
	if len(id) <= 14 {
		return id
	}
	return id[:12] + "…"
}
