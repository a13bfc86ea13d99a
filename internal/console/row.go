package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

type rowView struct {
	Row      *ledgerv1.Row
	Verify   *verifyView
	Statuses []ledgerv1.DisputeStatus // the dispute events a lead may append
	Drill    drillTarget
}

// ReadOnly reports whether the row is a read-only turn: a receipt whose
// class keeps no evidence bytes, so a drill of it has nothing to pull (a
// drill by its order or customer lists it among the look-ups).
func (v rowView) ReadOnly() bool {
	r := v.Row
	return r.GetKind() == ledgerv1.RowKind_ROW_KIND_RECEIPT &&
		(r.GetEvidenceNotKept() != "" || r.GetRetentionClass() == ledgerv1.RetentionClass_RETENTION_CLASS_READ_ONLY)
}

// verifyView sets VerifyRow's re-run beside the write-time checks.
type verifyView struct {
	Same        bool
	Differences string
	Lines       []verifyLine
}

type verifyLine struct {
	Name      string
	Then, Now *ledgerv1.Check // nil when the check is missing on that side
	Differ    bool
	// NotRerun: the check could not run again, as the API says the
	// result is the same (a read-only row's signatures: their evidence
	// is by design not kept); not a difference.
	NotRerun bool
}

// drillTarget is what the row page's drill button drills.
type drillTarget struct {
	RowID string
}

var disputeChoices = []ledgerv1.DisputeStatus{
	ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN,
	ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_CUSTOMER_AUTHORIZED,
	ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_INCIDENT,
	ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_OTHER,
}

// disputeChoicesFor are the dispute events a lead may append to r:
// resolved as an incident only when r names one (ledgerd refuses it
// otherwise).
func disputeChoicesFor(r *ledgerv1.Row) []ledgerv1.DisputeStatus {
	if r.GetIncidentId() != "" {
		return disputeChoices
	}
	var out []ledgerv1.DisputeStatus
	for _, st := range disputeChoices {
		if st != ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_INCIDENT {
			out = append(out, st)
		}
	}
	return out
}

// snapshotID is a JWKS snapshot id: hex SHA-256.
var snapshotID = rowID

func (h *handler) rowPage(w http.ResponseWriter, r *http.Request, s *session, id string, verify *verifyView) {
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
	if verify == nil {
		h.audit(r, s, "view row", err, slog.String("row", id))
	}
	if err != nil {
		h.rowError(w, r, s, id, err)
		return
	}
	h.render(w, r, s, http.StatusOK, "row", "Row "+short(id), rowView{Row: resp.GetRow(), Verify: verify, Statuses: disputeChoicesFor(resp.GetRow()), Drill: drillTarget{RowID: id}})
}

// rowError shows a failed call about row id: a row swept by retention as
// "expired" (410), anything else as the API's error.
func (h *handler) rowError(w http.ResponseWriter, r *http.Request, s *session, id string, err error) {
	if e, ok := expired(err); ok {
		e.ID = id
		h.render(w, r, s, http.StatusGone, "expired", "Expired row", e)
		return
	}
	h.apiError(w, r, s, err)
}

// pathID reads and bounds the {id} of a row or snapshot path.
func pathID(w http.ResponseWriter, r *http.Request, h *handler, s *session) (string, bool) {
	id := r.PathValue("id")
	if !rowRef.MatchString(id) {
		h.render(w, r, s, http.StatusNotFound, "error", "Not found", errorView{Title: "Not found", Message: "A row id is its 64 hex characters, or the first 8 or more of them.", Back: Prefix + "search"})
		return "", false
	}
	return strings.ToLower(id), true
}

func (h *handler) row(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := pathID(w, r, h, s)
	if !ok {
		return
	}
	if !rowID.MatchString(id) {
		// The start of an id: the row's page is at its whole id.
		ctx, cancel := h.call(r, s)
		defer cancel()
		resp, err := h.api.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
		if err != nil {
			h.rowError(w, r, s, id, err)
			return
		}
		http.Redirect(w, r, Prefix+"rows/"+resp.GetRow().GetId(), http.StatusSeeOther)
		return
	}
	h.rowPage(w, r, s, id, nil)
}

// verify re-runs the verifier on the stored bytes (VerifyRow) and shows the
// row with the result.
func (h *handler) verify(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := pathID(w, r, h, s)
	if !ok {
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.VerifyRow(ctx, &ledgerv1.VerifyRowRequest{Id: id})
	h.audit(r, s, "verify row", err, slog.String("row", id), slog.Bool("same", resp.GetSame()))
	if err != nil {
		h.rowError(w, r, s, id, err)
		return
	}
	h.rowPage(w, r, s, id, compareChecks(resp))
}

func compareChecks(resp *ledgerv1.VerifyRowResponse) *verifyView {
	v := &verifyView{Same: resp.GetSame(), Differences: resp.GetDifferences()}
	then := map[string]*ledgerv1.Check{}
	for _, c := range resp.GetWriteTimeChecks() {
		then[c.GetName()] = c
	}
	seen := map[string]bool{}
	for _, c := range resp.GetChecks() {
		t := then[c.GetName()]
		seen[c.GetName()] = true
		differ := t == nil || t.GetResult() != c.GetResult()
		notRerun := differ && t != nil && resp.GetSame() && c.GetResult() == ledgerv1.CheckResult_CHECK_RESULT_SKIPPED
		v.Lines = append(v.Lines, verifyLine{Name: c.GetName(), Now: c, Then: t, Differ: differ && !notRerun, NotRerun: notRerun})
	}
	for _, t := range resp.GetWriteTimeChecks() {
		if !seen[t.GetName()] {
			v.Lines = append(v.Lines, verifyLine{Name: t.GetName(), Then: t, Differ: true})
		}
	}
	return v
}

// dispute appends a dispute event (AppendDisputeEvent): support and admin
// keys; the API refuses anyone else.
func (h *handler) dispute(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := pathID(w, r, h, s)
	if !ok {
		return
	}
	st, known := ledgerv1.DisputeStatus_value[r.PostForm.Get("status")]
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if !known || len(note) > maxNote {
		h.render(w, r, s, http.StatusBadRequest, "error", "Bad form", errorView{Title: "The dispute event was not added",
			Message: fmt.Sprintf("Choose a status and keep the note to at most %d bytes (that many letters of English, about half as many accented or Cyrillic, a third as many Chinese or Japanese).", maxNote), Back: Prefix + "rows/" + id})
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	_, err := h.api.AppendDisputeEvent(ctx, &ledgerv1.AppendDisputeEventRequest{Id: id, Status: ledgerv1.DisputeStatus(st), Note: note})
	h.audit(r, s, "append dispute event", err, slog.String("row", id), slog.String("status", ledgerv1.DisputeStatus(st).String()))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"rows/"+id+"#disputes", http.StatusSeeOther)
}

// evidence downloads a row's stored evidence (GetEvidence) as JSON.
func (h *handler) evidence(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := pathID(w, r, h, s)
	if !ok {
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetEvidence(ctx, &ledgerv1.GetEvidenceRequest{Id: id})
	h.audit(r, s, "download evidence", err, slog.String("row", id))
	if err != nil {
		h.rowError(w, r, s, id, err)
		return
	}
	if v, ok := evidenceDiffers(resp, r.URL.Path); ok && r.URL.Query().Get("anyway") == "" {
		h.render(w, r, s, http.StatusConflict, "evidence-differs", "Evidence changed", v)
		return
	}
	b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	download(w, "evidence-"+id+".json", "application/json", append(b, '\n'))
}

// differsView is the warning shown instead of an evidence download whose
// bundle does not hash to the row's write-time hash.
type differsView struct {
	RowID, Read, Written, Where, Todo, Anyway string
}

// evidenceDiffers says, of an evidence answer whose bundle does not hash to
// its row's write-time hash, where it was read and what to do; path is the
// download's, for the link that downloads it all the same.
func evidenceDiffers(resp *ledgerv1.GetEvidenceResponse, path string) (differsView, bool) {
	read, written := resp.GetEvidenceSha256(), resp.GetRowEvidenceSha256()
	if resp.GetNotKept() != "" || written == "" || read == written {
		return differsView{}, false
	}
	v := differsView{RowID: resp.GetRowId(), Read: read, Written: written, Anyway: path + "?anyway=1"}
	switch resp.GetReadFrom() {
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_WRITE_ONCE_COPY:
		v.Where = "its write-once copy"
		v.Todo = "The write-once copy itself changed, so ledgerctl fsck --restore cannot mend it (it puts a bundle back from an intact write-once copy). Ask an operator to run ledgerctl fsck and look into it as possible tampering."
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_ROW_STORE:
		v.Where = "the row store"
		v.Todo = "Ask an operator to run ledgerctl fsck: when the row's write-once copy still matches, ledgerctl fsck --restore (an admin key) puts the bundle back from it. Otherwise it is for a look into possible tampering."
	default:
		v.Where = "the ledger's cache of recent bundles"
		v.Todo = "Ask an operator to run ledgerctl fsck, which reads the write-once copy, and look into it as possible tampering."
	}
	return v, true
}

// proof downloads the row's Merkle log proof bundle (GetRowProof): a file
// that verifies offline with the log's published key
// (`ledgerctl proof verify`).
func (h *handler) proof(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := pathID(w, r, h, s)
	if !ok {
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: id})
	h.audit(r, s, "download proof", err, slog.String("row", id))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	download(w, "proof-"+id+".json", "application/json", []byte(resp.GetBundle()))
}

// jwks downloads the exact bytes of a JWKS snapshot (GetJwksSnapshot).
func (h *handler) jwks(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !snapshotID.MatchString(id) {
		h.render(w, r, s, http.StatusNotFound, "error", "Not found", errorView{Title: "Not found", Message: "A snapshot id is 64 lowercase hex characters."})
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetJwksSnapshot(ctx, &ledgerv1.GetJwksSnapshotRequest{Id: id})
	h.audit(r, s, "download jwks snapshot", err, slog.String("snapshot", id))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	download(w, "jwks-"+id+".json", "application/json", resp.GetJwks())
}

var safeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// download sends body as an attachment.
func download(w http.ResponseWriter, name, ctype string, body []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeName.ReplaceAllString(name, "_")+`"`)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}
