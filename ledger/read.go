package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

var idPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidID reports whether id is a row or snapshot id: 64 lowercase hex.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func checkID(id string) error {
	if !ValidID(id) {
		return invalid("id must be 64 lowercase hex characters")
	}
	return nil
}

// Get returns the row with id.
func (l *Ledger) Get(ctx context.Context, id string) (*Row, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var r *Row
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		r, err = row(tx, id)
		return err
	})
	if err != nil {
		var ee *ExpiredError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, fmt.Errorf("row %s: %w", id, err)
	}
	return r, nil
}

// List returns one page of rows matching q, newest first. A page reads
// at most MaxListRead index entries (Rows.List): it may hold fewer rows
// than q.PageSize, even none, while its token says more may follow.
func (l *Ledger) List(ctx context.Context, q Query) ([]*Row, string, error) {
	return l.ListWithin(ctx, q, 0, nil)
}

// ListWithin is List with a page that also ends before the row that would
// take the sizes of its rows, as size measures them, past budget: the page
// holds at least one row when q's read bound found any, and its token
// continues after its last row. A budget of 0 bounds nothing.
func (l *Ledger) ListWithin(ctx context.Context, q Query, budget int, size func(*Row) int) ([]*Row, string, error) {
	switch {
	case q.PageSize < 0 || q.PageSize > 1000:
		return nil, "", invalid("pageSize must be between 1 and 1000")
	case q.PageSize == 0:
		q.PageSize = 100
	}
	for name, v := range map[string]string{"principal": q.Principal, "grantId": q.GrantID, "target": q.Target, "agent": q.Agent} {
		if err := checkField(name, v, MaxFieldLength); err != nil {
			return nil, "", err
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return nil, "", invalid("until must be after since")
	}
	var rows []*Row
	var next string
	// The entries this call read, counted for the caller (q.Read) and
	// the ledger (ListRead). The store ends the page at the budget
	// itself, in the one call, so one page reads at most the bound.
	read, out := 0, q.Read
	q.Read = &read
	if budget > 0 {
		q.Budget, q.Size = budget, size
	}
	defer func() { l.listRead.Add(int64(read)) }()
	err := l.store.View(ctx, func(tx Tx) error {
		read = 0 // a View run again reads again
		var err error
		rows, next, err = tx.List(q)
		return err
	})
	if out != nil {
		*out += read
	}
	return rows, next, err
}

// ListRead returns how many index entries the pages of List and
// ListWithin read since the ledger was opened: with the calls made, what
// a page reads on average, and a test's measure that a page's reads stay
// bounded (MaxListRead).
func (l *Ledger) ListRead() int64 { return l.listRead.Load() }

// fitting returns how many of items, from the first, fit within budget as
// size measures them: at least one.
func fitting[T any](items []T, budget int, size func(T) int) int {
	total := 0
	for i, it := range items {
		if total += size(it); total > budget && i > 0 {
			return i
		}
	}
	return len(items)
}

// EvidenceView is a row's stored evidence and where its objects are held.
type EvidenceView struct {
	RowID string
	// NotKept says why the bundle was not kept (read-only class).
	NotKept  string
	Evidence Evidence
	// SHA256 is the hash of the bundle read (Evidence decodes it),
	// RowSHA256 the row's write-time hash of its bundle, and ReadFrom
	// where the bundle was read; all empty when it is not kept.
	SHA256    string
	RowSHA256 string
	ReadFrom  EvidenceSource
	Snapshots []string
	Objects   []ObjectView
}

// Differs reports whether the bundle read does not hash to the row's
// write-time hash: it was changed where ReadFrom says.
func (v *EvidenceView) Differs() bool { return v.NotKept == "" && v.SHA256 != v.RowSHA256 }

// ObjectView is one evidence object and its location.
type ObjectView struct {
	Name     string
	Location Location
}

// Evidence returns the stored evidence of row id: the bundle read, with its
// hash beside the row's write-time hash and where it was read (the row
// store, the write-once copy, or the cache of recent bundles, which leaves
// the stored copy unread). A bundle that differs is returned all the same,
// for the caller to show; Differs says so.
func (l *Ledger) Evidence(ctx context.Context, id string) (*EvidenceView, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	v := &EvidenceView{RowID: id}
	var stored storedEvidence
	err := l.store.View(ctx, func(tx Tx) error {
		r, err := row(tx, id)
		if err != nil {
			return err
		}
		if r.KeepsNoEvidence() {
			v.NotKept = r.EvidenceNotKept
		} else {
			v.RowSHA256 = r.EvidenceSHA256
			if stored, err = loadEvidence(tx, id); err != nil {
				return err
			}
			loc, err := l.location(tx, EvidenceKey(id), l.cfg.Policy.ObjectRetainUntil(r.Class, r.RetentionStart()))
			if err != nil {
				return err
			}
			v.Objects = append(v.Objects, ObjectView{Name: ObjectEvidence, Location: loc})
		}
		for _, s := range []string{r.BrandKey.JWKSSnapshot, r.Agent.JWKSSnapshot} {
			if s == "" || slices.Contains(v.Snapshots, s) {
				continue
			}
			v.Snapshots = append(v.Snapshots, s)
			loc, err := l.location(tx, SnapshotKey(s), time.Time{})
			if err != nil {
				return err
			}
			v.Objects = append(v.Objects, ObjectView{Name: ObjectJWKS, Location: loc})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("evidence of %s: %w", id, err)
	}
	if v.NotKept == "" {
		bundle, from, err := l.evidenceBytes(ctx, id, v.RowSHA256, stored)
		if err != nil {
			return nil, err
		}
		v.SHA256, v.ReadFrom = sha256Hex(bundle), from
		if err := json.Unmarshal(bundle, &v.Evidence); err != nil {
			if v.Differs() {
				return nil, fmt.Errorf("decode evidence of %s: the bundle read from the %s hashes to %s, not the write-time %s: it was changed there: %w", id, from, v.SHA256, v.RowSHA256, err)
			}
			return nil, fmt.Errorf("decode evidence of %s: %w", id, err)
		}
	}
	return v, nil
}

// Snapshot returns a JWKS snapshot and where its object is held.
func (l *Ledger) Snapshot(ctx context.Context, id string) (verifier.Snapshot, Location, error) {
	if err := checkID(id); err != nil {
		return verifier.Snapshot{}, Location{}, err
	}
	var s verifier.Snapshot
	var loc Location
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if s, err = tx.Snapshot(id); err != nil {
			return err
		}
		loc, err = l.location(tx, SnapshotKey(id), time.Time{})
		return err
	})
	if err != nil {
		return s, loc, fmt.Errorf("jwks snapshot %s: %w", id, err)
	}
	return s, loc, nil
}

// location returns where an object is held; while it waits in the outbox,
// its key with Uploaded false and the retain-until it will get (when known).
func (l *Ledger) location(tx Tx, key string, retain time.Time) (Location, error) {
	loc, err := tx.Object(key)
	if errors.Is(err, ErrNotFound) {
		return Location{Key: key, RetainUntil: retain}, nil
	}
	return loc, err
}

// Reverification compares a re-run of the checks with the write-time record.
type Reverification struct {
	RowID       string
	Checks      []verifier.Check
	WriteTime   []verifier.Check
	Same        bool
	Differences []string
	// Edited are the differences of Differences that are the row's
	// fields or status against its evidence or its checks: each ends "the
	// row was edited after it was written".
	Edited []string
}

// VerifyRow re-runs every check on the stored bytes with the stored JWKS
// snapshots, as of the row's original time. within_limits, duplicate and
// grant_not_revoked depend on the ledger's state at write time and are
// carried over from the write-time record. Same is false when any result differs, the stored
// evidence no longer hashes to the write-time evidence hash, or a field
// of the row the write path took from its evidence (principal, grant,
// brand, agent, scopes, issued-at, limits, key ids, each action's tool,
// target and args hash) differs from what the evidence gives, or the
// row's status from the one its write-time checks give. A read-only
// row keeps no evidence: its signatures and fields are not checked, and
// its skipped receipt_signature check says so.
func (l *Ledger) VerifyRow(ctx context.Context, id string) (*Reverification, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var (
		r      *Row
		stored storedEvidence
		src    = &snapshotSource{}
	)
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if r, err = row(tx, id); err != nil {
			return err
		}
		if r.KeepsNoEvidence() {
			return nil
		}
		if stored, err = loadEvidence(tx, id); err != nil {
			return err
		}
		src.brand, src.brandKeys, err = loadSnapshot(tx, r.Brand, r.BrandKey.JWKSSnapshot)
		if err != nil {
			return err
		}
		src.brandIssuer = writeTimeIssuer(r)
		src.agent, src.agentKeys, err = loadSnapshot(tx, r.Agent.Platform, r.Agent.JWKSSnapshot)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("verify row %s: %w", id, err)
	}
	out := &Reverification{RowID: id, WriteTime: r.Verifier.Checks, Same: true}
	if d := statusEdited(r); d != "" {
		out.edited([]string{d})
	}
	if r.KeepsNoEvidence() {
		for _, c := range r.Verifier.Checks {
			switch c.Name {
			case verifier.CheckReceiptSignature:
				out.Checks = append(out.Checks, verifier.Check{Name: c.Name, Result: verifier.Skipped, Detail: r.EvidenceNotKept + "; " + notKeptFields})
			case verifier.CheckRequestSignature, verifier.CheckDelegationToken:
				out.Checks = append(out.Checks, verifier.Check{Name: c.Name, Result: verifier.Skipped, Detail: r.EvidenceNotKept})
			default:
				c.Detail = "as recorded at write time: " + c.Detail
				out.Checks = append(out.Checks, c)
			}
		}
		return out, nil
	}
	bundle, err := l.storedBundle(ctx, id, stored)
	if err != nil {
		return nil, fmt.Errorf("verify row %s: %w", id, err)
	}
	// The row's fields are compared with evidence as written only: an
	// edited bundle gives other fields, and is the difference.
	got := sha256Hex(bundle)
	asWritten := got == r.EvidenceSHA256
	if !asWritten {
		out.Same = false
		out.Differences = append(out.Differences, fmt.Sprintf("stored evidence hashes to %s, not the write-time %s: the evidence was edited", got, r.EvidenceSHA256))
	}
	var ev Evidence
	if err := json.Unmarshal(bundle, &ev); err != nil {
		out.Same = false
		out.Differences = append(out.Differences, "stored evidence is not readable: "+err.Error())
		return out, nil
	}
	return reverify(ctx, l.v, r, &ev, got, src, out), nil
}

// Reverify re-runs the checks of row r on evidence ev, whose bundle
// hashes to the hex SHA-256 evSHA, with keys taken only from the JWKS
// snapshots given (nil for one not held), as VerifyRow
// does on the ledger's stored copy, with v's audience and allow-list. It
// is the re-run of one who holds the row, its evidence and its
// snapshots, each bound to the row's log leaf by its hash, and takes no
// server's re-run on trust (ledgerctl log audit). Same is false when a
// result differs from the row's write-time one, evSHA is not the row's
// write-time hash, or a field of the row differs from what the evidence
// gives; Differences says which. The request JWT's hash, which the API
// does not show, is compared only when r holds one (as EvidenceDiffs).
func Reverify(ctx context.Context, v *verifier.Verifier, r *Row, ev *Evidence, evSHA string, brandJWKS, agentJWKS *verifier.Snapshot) *Reverification {
	r = withRequestJWTHash(r, ev)
	out := &Reverification{RowID: r.ID, WriteTime: r.Verifier.Checks, Same: true}
	if d := statusEdited(r); d != "" {
		out.edited([]string{d})
	}
	if evSHA != r.EvidenceSHA256 {
		out.Same = false
		out.Differences = append(out.Differences, fmt.Sprintf("the evidence hashes to %s, not the write-time %s: the evidence was edited", evSHA, r.EvidenceSHA256))
	}
	src := &snapshotSource{brand: r.Brand, brandIssuer: writeTimeIssuer(r), agent: r.Agent.Platform}
	if brandJWKS != nil {
		src.brandKeys, _ = verifier.ParseKeySet(*brandJWKS)
	}
	if agentJWKS != nil {
		src.agentKeys, _ = verifier.ParseKeySet(*agentJWKS)
	}
	return reverify(ctx, v, r, ev, evSHA, src, out)
}

// reverify re-runs row r's checks on its evidence ev (hashing to evSHA)
// with the keys of src, adding to out what differs.
func reverify(ctx context.Context, v *verifier.Verifier, r *Row, ev *Evidence, evSHA string, src *snapshotSource, out *Reverification) *Reverification {
	asWritten := evSHA == r.EvidenceSHA256
	requestJWT := ev.RequestJWT
	if ev.Refusal != nil {
		requestJWT = ev.Refusal.RequestJWT
	}
	request, _ := verifier.ReadRequestClaims(requestJWT)
	if aud, ok := writeTimeAudience(r, request); ok {
		v = v.WithAudience(aud)
	}
	if r.Kind == KindRefusal {
		out = reverifyRefusal(ctx, v, r, ev.Refusal, src, out)
		if asWritten {
			out.edited(editedFields(ctx, r, ev, evSHA, nil))
		}
		return out
	}
	// The agent's snapshot holds the keys fetched for the issuer the
	// request JWT names, which need not be the receipt's pa.
	if request.Iss != "" {
		src.agent = request.Iss
	}
	res, err := v.Verify(ctx, verifier.Input{ReceiptJWS: ev.ReceiptJWS, RequestJWT: ev.RequestJWT, DelegationToken: ev.DelegationToken, Actions: ev.Actions}, src)
	if err != nil {
		out.Same = false
		out.Differences = append(out.Differences, "stored receipt no longer parses: "+err.Error())
		return out
	}
	out.Checks = res.Checks
	for _, c := range r.Verifier.Checks {
		if c.Name == verifier.CheckWithinLimits || c.Name == verifier.CheckDuplicate || c.Name == verifier.CheckGrantNotRevoked {
			c.Detail = "as recorded at write time: " + c.Detail
			out.Checks = append(out.Checks, c)
		}
	}
	for _, w := range r.Verifier.Checks {
		i := slices.IndexFunc(out.Checks, func(c verifier.Check) bool { return c.Name == w.Name })
		if i < 0 {
			out.Same = false
			out.Differences = append(out.Differences, w.Name+" was not re-run")
			continue
		}
		if out.Checks[i].Result != w.Result {
			out.Same = false
			out.Differences = append(out.Differences, fmt.Sprintf("%s was %s at write time, now %s (%s)", w.Name, w.Result, out.Checks[i].Result, out.Checks[i].Detail))
		}
	}
	if asWritten {
		// The fields as the write path took them from the evidence, with
		// the re-run's key ids and grant expiry when it gives the
		// write-time verdict (else its key ids differ for that reason).
		signed := res
		if !out.Same {
			signed = nil
		}
		out.edited(editedFields(ctx, r, ev, evSHA, signed))
	}
	return out
}

// writeTimeAudience is the audience row r's request JWT was held to at
// write time, as writeTimeIssuer is the issuer: a request_signature check
// that failed on the audience names it; one that passed, or failed on a
// claim checked after it, was held to the one the JWT names; one that
// failed before it (the JWT unreadable, its signature, iss or sub) fails
// on that again whatever the audience. So a row re-runs as written even
// after the ledger's audience was changed. False when neither gives one:
// the verifier's own stands.
func writeTimeAudience(r *Row, request verifier.RequestClaims) (string, bool) {
	for _, c := range r.Verifier.Checks {
		if c.Name == verifier.CheckRequestSignature && c.Result == verifier.Fail {
			if aud, ok := verifier.AudienceHeldTo(c.Detail); ok {
				return aud, true
			}
		}
	}
	return request.Audience()
}

func loadSnapshot(tx Tx, owner, id string) (string, *verifier.KeySet, error) {
	if id == "" {
		return owner, nil, nil
	}
	s, err := tx.Snapshot(id)
	if errors.Is(err, ErrNotFound) {
		return owner, nil, nil
	}
	if err != nil {
		return owner, nil, err
	}
	ks, err := verifier.ParseKeySet(s)
	if err != nil {
		return owner, nil, nil
	}
	return owner, ks, nil
}

// snapshotSource serves the keys a row's stored snapshots hold, never the
// live JWKS.
type snapshotSource struct {
	brand, agent         string
	brandKeys, agentKeys *verifier.KeySet
	// brandIssuer is the iss the row's delegation token was held to,
	// when its check depends on it.
	brandIssuer string
}

func (s *snapshotSource) Brand(_ context.Context, url string, _ bool) (verifier.Signer, error) {
	if s.brandKeys == nil || url != s.brand {
		return verifier.Signer{}, fmt.Errorf("%w for brand %s", verifier.ErrNoSnapshot, url)
	}
	return verifier.Signer{Keys: s.brandKeys, Issuer: s.brandIssuer}, nil
}

// writeTimeIssuer is the iss row r's delegation token was held to at
// write time, when its check failed on it: the failed check's detail
// names it (verifier.IssuerHeldTo). A token that passed carried the
// issuer it was held to, and one that failed on anything else fails on it
// again: held to none, either gives its write-time result.
//
// A detail that names the token's iss and no issuer it was held to was
// cut: an answer carries 2 KiB of a detail, and rows written before the
// token's iss was bounded in it (maxIssShown) quoted it whole. The token
// failed on its issuer then, and is held to one no token carries, so it
// fails on it again.
func writeTimeIssuer(r *Row) string {
	for _, c := range r.Verifier.Checks {
		if c.Name == verifier.CheckDelegationToken && c.Result == verifier.Fail {
			iss, ok := verifier.IssuerHeldTo(c.Detail)
			if !ok && strings.HasPrefix(c.Detail, `iss "`) {
				return issuerInACutDetail
			}
			return iss
		}
	}
	return ""
}

// issuerInACutDetail is the issuer a delegation token is held to when
// run again, where its write-time check failed on its issuer and the
// detail that named it was cut. It ends in a byte no token's iss holds
// (a JSON string decodes to valid UTF-8), so no token carries it.
const issuerInACutDetail = "urn:pactledger:reverify:the-issuer-a-cut-detail-named\xff"

func (s *snapshotSource) Agent(_ context.Context, iss string, _ bool) (verifier.Signer, error) {
	if s.agentKeys == nil || iss != s.agent {
		return verifier.Signer{}, fmt.Errorf("%w for agent %s", verifier.ErrNoSnapshot, iss)
	}
	return verifier.Signer{Keys: s.agentKeys}, nil
}

// AppendDispute appends a dispute event to row id, by the named key. The
// evidence fields never change.
func (l *Ledger) AppendDispute(ctx context.Context, id string, status DisputeStatus, note, by string) (*Row, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if status < DisputeOpen || status > DisputeResolvedOther {
		return nil, invalid("status must be DISPUTE_STATUS_OPEN or one of the DISPUTE_STATUS_RESOLVED_ values")
	}
	if err := checkText("note", note, MaxNoteLength, true); err != nil {
		return nil, err
	}
	if err := l.checkWriteClock(ctx, l.cfg.Now()); err != nil {
		return nil, err
	}
	var row *Row
	err := l.store.Update(ctx, func(tx Tx) error {
		r, err := tx.Row(id)
		if err != nil {
			return err
		}
		if status == DisputeResolvedIncident && r.IncidentID == "" {
			return fmt.Errorf("%w: row %s names no incident (its status is %s): a dispute resolved as an incident is for a row the ledger recorded as one; resolve it as customer-authorized or other",
				ErrConflict, r.ID, r.Status)
		}
		now := l.cfg.Now().UTC()
		if err := l.checkWriteClock(ctx, now); err != nil {
			return err // the clock stepped since the check on the way in
		}
		ev := DisputeEvent{At: now, Status: status, Note: note, By: by}
		r.DisputeEvents = append(r.DisputeEvents, ev)
		r.Dispute = status
		row = r
		n := len(r.DisputeEvents) - 1
		if err := l.queueLeaf(tx, disputeRef(r.ID, n), disputeLeaf(r.ID, n, ev)); err != nil {
			return err
		}
		if err := tx.UpdateDispute(r.ID, r.Dispute, r.DisputeEvents); err != nil {
			return err
		}
		// A disputed row, with its evidence, is kept at least the
		// incident period past its latest dispute event (and while its
		// dispute is open: the sweep).
		return extendRow(tx, r, l.cfg.Policy.Periods[retention.Incident].After(ev.At), ev.At)
	})
	if err != nil {
		return nil, fmt.Errorf("dispute row %s: %w", id, err)
	}
	l.wake() // the objects' extension, when there is one
	l.wakeLog()
	return row, nil
}

// RefusalInput is an AppendRefusal request.
type RefusalInput struct {
	ClaimedPrincipal string    `json:"claimedPrincipal,omitempty"`
	ClaimedAgent     string    `json:"claimedAgent,omitempty"`
	RequestJWT       string    `json:"requestJwt,omitempty"`
	Tool             string    `json:"tool,omitempty"`
	Target           string    `json:"target,omitempty"`
	Reason           string    `json:"reason,omitempty"`
	ObservedAt       time.Time `json:"observedAt"`
	// DelegationToken is the delegation token the refused request
	// carried, when it carried one: verified as of ObservedAt, it ties
	// the refusal to its grant (AppendRefusal).
	DelegationToken string `json:"delegationToken,omitempty"`
}

// maxObservedAhead is how far past the ledger's clock a refusal's
// observedAt may lie (writer clock skew).
const maxObservedAhead = time.Hour

// AppendRefusal records an action refused or taken without a verifiable
// receipt. Posting the same refusal twice returns the first row.
//
// A refusal posted with the delegation token its request carried keeps
// the token in its evidence and has it checked as of ObservedAt as a
// receipt's token is (verifier.VerifyRefusalToken: the brand's signature,
// with the brand's key set kept as a JWKS snapshot, iss, exp present,
// issued before the refusal, and bound to the request JWT's agent when a
// request JWT is posted), but not refused for having expired or for a
// revoked grant: that is often why the request was refused. Only a token
// that passes sets the row's grant, brand and principal (its grant_id,
// aud and sub), so that the grant's rows (Grant, ListRows by grant)
// include the refusal; one that fails is kept with its failed check and
// ties the row to no grant. The row's grant_not_revoked check then says
// whether the ledger holds a revocation of the grant from before the
// refusal: an agent that acted after the revocation. It returns an error
// wrapping ErrKeysUnavailable, with nothing stored, when the brand's keys
// cannot be fetched.
func (l *Ledger) AppendRefusal(ctx context.Context, in RefusalInput) (*Row, error) {
	for _, f := range [...]struct{ name, v string }{{"claimedPrincipal", in.ClaimedPrincipal}, {"claimedAgent", in.ClaimedAgent}, {"action.tool", in.Tool}, {"action.target", in.Target}} {
		if err := checkText(f.name, f.v, MaxFieldLength, false); err != nil {
			return nil, err
		}
	}
	if err := checkText("reason", in.Reason, MaxNoteLength, true); err != nil {
		return nil, err
	}
	if err := checkField("requestJwt", in.RequestJWT, verifier.MaxTokenBytes); err != nil {
		return nil, err
	}
	if err := checkField("delegationToken", in.DelegationToken, verifier.MaxTokenBytes); err != nil {
		return nil, err
	}
	if in.Tool == "" || in.Reason == "" {
		return nil, invalid("action.tool and reason are required")
	}
	if in.ObservedAt.IsZero() {
		return nil, invalid("observedAt is required")
	}
	if err := l.checkWriteClock(ctx, l.cfg.Now()); err != nil {
		return nil, err
	}
	in.ObservedAt = in.ObservedAt.UTC()
	if latest := l.cfg.Now().Add(maxObservedAhead); !verifier.InRange(in.ObservedAt) || in.ObservedAt.After(latest) {
		return nil, invalid("observedAt %s must lie between %s and an hour from now", in.ObservedAt.Format(time.RFC3339), verifier.MinTime.Format(time.RFC3339))
	}
	// Each token is refused or canonicalised like every token (RFC 7515
	// §2): the record keeps the low-s encoding, so a re-encoded token
	// yields the same refusal row.
	for _, f := range []struct {
		name string
		v    *string
	}{{"requestJwt", &in.RequestJWT}, {"delegationToken", &in.DelegationToken}} {
		if *f.v == "" {
			continue
		}
		t := verifier.ParseToken(*f.v)
		switch _, err := t.Compact(); {
		case errors.Is(err, verifier.ErrNotCanonical):
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, f.name, err)
		case err == nil:
			*f.v = t.Canonical()
		}
	}
	bundle, err := json.Marshal(Evidence{Refusal: &in})
	if err != nil {
		return nil, fmt.Errorf("encode refusal: %w", err)
	}
	id := sha256Hex(bundle)
	agent, kid := refusalAgent(&in)
	// The request JWT's iss, when it has one, is the row's agent: no
	// check vouches for it, and it is a name like claimedAgent.
	if err := checkText("requestJwt: its iss", agent, verifier.MaxTokenBytes, false); err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ name, raw string }{{"requestJwt", in.RequestJWT}, {"delegationToken", in.DelegationToken}} {
		if err := checkHeaderKid(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	skip := func(name string) verifier.Check {
		return verifier.Check{Name: name, Result: verifier.Skipped, Detail: "refusal: no receipt to check"}
	}
	checks := []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: verifier.Fail, Detail: "no receipt was presented: " + in.Reason}}
	for _, n := range []string{verifier.CheckRequestSignature, verifier.CheckDelegationToken, verifier.CheckBindings, verifier.CheckScopesWithin, verifier.CheckArgsHash, verifier.CheckWithinLimits, verifier.CheckDuplicate, verifier.CheckGrantNotRevoked} {
		checks = append(checks, skip(n))
	}
	var digests tokenDigests
	if l.log != nil {
		digests = digestsOf(&Evidence{Refusal: &in})
	}
	var tok *verifier.RefusalToken
	if in.DelegationToken != "" {
		// A refusal posted again needs no verification (and gets its row
		// while the brand's keys cannot be fetched).
		var prev *Row
		err := l.store.View(ctx, func(tx Tx) error {
			r, err := tx.Row(id)
			switch {
			case err == nil:
				prev = r
				return nil
			case !errors.Is(err, ErrNotFound):
				return err
			}
			return sweptRow(tx, id)
		})
		if err != nil || prev != nil {
			return prev, err
		}
		tok, err = l.refusalToken(ctx, in)
		if err != nil {
			return nil, err
		}
	}
	var row *Row
	err = l.store.Update(ctx, func(tx Tx) error {
		row = nil
		prev, err := tx.Row(id)
		if err == nil {
			row = prev
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		// A refusal whose row was swept is not recorded again: its id
		// keeps its tombstone and its leaf in the log.
		if err := sweptRow(tx, id); err != nil {
			return err
		}
		// Checked again by the time it is recorded at: the clock may have
		// stepped since the check on the way in.
		now := l.cfg.Now().UTC()
		if err := l.checkWriteClock(ctx, now); err != nil {
			return err
		}
		r := newRefusalRow(&in, id, agent, kid)
		r.Status, r.RecordedAt, r.Class, r.Dispute = Unauthorized, now, retention.Refused, DisputeNone
		r.Verifier = Record{CheckedBy: l.v.CheckedBy(), CheckedAt: now, Checks: slices.Clone(checks)}
		var snaps []*verifier.Snapshot
		if tok != nil {
			snaps = []*verifier.Snapshot{tok.BrandSnapshot, tok.AgentSnapshot}
			if err := underGrant(tx, r, tok); err != nil {
				return err
			}
		}
		r.RetainUntil = l.cfg.Policy.RetainUntil(r.Class, r.RetentionStart())
		if err := l.commitRow(tx, r, bundle, digests, snaps...); err != nil {
			return err
		}
		row = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.cfg.Metrics.write(Created, Unauthorized)
	l.wake()
	l.wakeLog()
	return row, nil
}
