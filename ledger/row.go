package ledger

import (
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Kind says what a row records.
type Kind int

// Row kinds.
const (
	KindReceipt Kind = iota + 1
	KindRefusal
)

// Status is a row's classification under the ledger's three rules.
type Status int

// Row statuses.
const (
	// Authorized: every check passed.
	Authorized Status = iota + 1
	// Unauthorized: no verifiable receipt (rule 1), or a refusal.
	Unauthorized
	// Incident: scopes beyond the grant, args hash mismatch or limits exceeded (rule 2).
	Incident
	// Duplicate: the receipt or request JWT was recorded before with other evidence.
	Duplicate
)

func (s Status) String() string {
	switch s {
	case Authorized:
		return "authorized"
	case Unauthorized:
		return "unauthorized"
	case Incident:
		return "incident"
	case Duplicate:
		return "duplicate"
	}
	return "unspecified"
}

// DisputeStatus is the latest dispute state of a row.
type DisputeStatus int

// Dispute statuses.
const (
	DisputeNone DisputeStatus = iota + 1
	DisputeOpen
	DisputeResolvedCustomerAuthorized
	DisputeResolvedIncident
	DisputeResolvedOther
)

func (d DisputeStatus) String() string {
	switch d {
	case DisputeNone:
		return "none"
	case DisputeOpen:
		return "open"
	case DisputeResolvedCustomerAuthorized:
		return "resolved_customer_authorized"
	case DisputeResolvedIncident:
		return "resolved_incident"
	case DisputeResolvedOther:
		return "resolved_other"
	}
	return "unspecified"
}

// Outcome says what an append did.
type Outcome int

// Append outcomes.
const (
	Created Outcome = iota + 1
	AlreadyRecorded
	DuplicateRecorded
)

func (o Outcome) String() string {
	switch o {
	case Created:
		return "created"
	case AlreadyRecorded:
		return "already_recorded"
	case DuplicateRecorded:
		return "duplicate"
	}
	return "unspecified"
}

// Agent identifies the personal agent platform behind a row.
type Agent struct {
	Platform      string `json:"platform,omitempty"`
	RequestJWTKid string `json:"requestJwtKid,omitempty"`
	JWKSSnapshot  string `json:"jwksSnapshot,omitempty"`
}

// BrandKey identifies the key that signed the receipt.
type BrandKey struct {
	Kid          string `json:"kid,omitempty"`
	JWKSSnapshot string `json:"jwksSnapshot,omitempty"`
}

// Limits are the writer's record of caps on a grant, and the grant expiry.
type Limits struct {
	AmountMax    string    `json:"amountMax,omitempty"`
	CountMax     int       `json:"countMax,omitempty"`
	GrantExpires time.Time `json:"grantExpires,omitzero"`
}

// Record is the verifier's record stored with a row.
type Record struct {
	CheckedBy   string           `json:"checkedBy"`
	CheckedAt   time.Time        `json:"checkedAt"`
	Checks      []verifier.Check `json:"checks"`
	DuplicateOf string           `json:"duplicateOf,omitempty"`
}

// passed reports whether the check name passed.
func (r Record) passed(name string) bool {
	for _, c := range r.Checks {
		if c.Name == name && c.Result == verifier.Pass {
			return true
		}
	}
	return false
}

// DisputeEvent is one appended dispute status.
type DisputeEvent struct {
	At     time.Time     `json:"at"`
	Status DisputeStatus `json:"status"`
	Note   string        `json:"note,omitempty"`
	By     string        `json:"by"`
}

// DisputeState is row r's dispute state as its events give it: the
// status of the latest, DisputeNone when it has none. Dispute is a copy
// kept beside the events, which the Merkle log holds and the audit
// checks, and is read nowhere for a decision or an answer: an edit of
// it alone in the row store shows nowhere and keeps nothing, and fsck
// reports it (disputeEdited).
func (r *Row) DisputeState() DisputeStatus {
	if n := len(r.DisputeEvents); n > 0 {
		return r.DisputeEvents[n-1].Status
	}
	return DisputeNone
}

// Refusal is what a refusal row records.
type Refusal struct {
	ClaimedPrincipal string `json:"claimedPrincipal,omitempty"`
	ClaimedAgent     string `json:"claimedAgent,omitempty"`
	Reason           string `json:"reason,omitempty"`
}

// Row is one ledger row. The evidence fields never change after the write;
// only DisputeStatus and DisputeEvents grow.
type Row struct {
	ID                string               `json:"id"`
	ReceiptID         string               `json:"receiptId"`
	Kind              Kind                 `json:"kind"`
	Status            Status               `json:"status"`
	GrantID           string               `json:"grantId,omitempty"`
	Principal         string               `json:"principal,omitempty"`
	Brand             string               `json:"brand,omitempty"`
	Agent             Agent                `json:"agent"`
	BrandKey          BrandKey             `json:"brandKey"`
	ScopeGranted      []string             `json:"scopeGranted,omitempty"`
	ScopesUsed        []string             `json:"scopesUsed,omitempty"`
	Limits            Limits               `json:"limits"`
	Actions           []verifier.RowAction `json:"actions,omitempty"`
	IssuedAt          time.Time            `json:"issuedAt"`
	RecordedAt        time.Time            `json:"recordedAt"`
	Verifier          Record               `json:"verifier"`
	Class             retention.Class      `json:"retentionClass"`
	RetainUntil       time.Time            `json:"retainUntil,omitzero"`
	IncidentID        string               `json:"incidentId,omitempty"`
	Dispute           DisputeStatus        `json:"disputeStatus"`
	DisputeEvents     []DisputeEvent       `json:"disputeEvents,omitempty"`
	EvidenceSHA256    string               `json:"evidenceSha256"`
	Refusal           *Refusal             `json:"refusal,omitempty"`
	ContextID         string               `json:"contextId,omitempty"`
	MessageID         string               `json:"messageId,omitempty"`
	UnclassifiedTools []string             `json:"unclassifiedTools,omitempty"`
	// RequestJWTSHA256 is the hex SHA-256 of the request JWT, for dedupe.
	RequestJWTSHA256 string `json:"requestJwtSha256,omitempty"`
	// RequestJWTTwinSHA256 is, while the row is written, the hex SHA-256
	// of the request JWT's other encoding (an ES256 signature's malleated
	// twin) when it has one. Dedupe reads both; a store whose writes run
	// at once indexes the row under both, so that two rows posting the
	// twins meet on one key and the later is found a duplicate. Not kept
	// with the row.
	RequestJWTTwinSHA256 string `json:"-"`
	// ReceiptTwinSHA256 is, while the row is written, the hex SHA-256 of
	// the receipt's other encoding (an ES256 signature's malleated twin)
	// when it has one: a store whose writes run at once keys the first
	// row of a receipt by both (storage/postgres), so that two rows
	// posting the twins meet and the later is found a duplicate. Not kept
	// with the row.
	ReceiptTwinSHA256 string `json:"-"`
	// RequestJWTTakenFrom is, while the row is written, the request-JWT
	// entries it takes over, by hash (either encoding of its request
	// JWT): each names a row this one was measured against and passed
	// over, a receipt no signature vouches for that an earlier version
	// indexed (IndexesRequestJWT; dedupe). CreateRow makes each of those
	// entries that still names that row name this one. Not kept with the
	// row.
	RequestJWTTakenFrom map[string]string `json:"-"`
	// EvidenceNotKept says why the evidence bundle was not kept (the
	// read-only class); empty when it was. Read it through KeepsNoEvidence.
	EvidenceNotKept string `json:"evidenceNotKept,omitempty"`

	// countsToo is, while the row is written, whether it duplicates an
	// earlier row by the request JWT alone and counts toward the grant's
	// limits nonetheless: its receipt has other claims (SameReceipt:
	// another turn), or the earlier row's receipt signature failed (a
	// forged copy posted first). Not kept with the row.
	countsToo bool
	// unvouchedFirst is, while the row is written, the earlier row that
	// used its request JWT when that row's receipt or request signature
	// failed (IndexesRequestJWT) and this row's receipt signature passed:
	// no earlier record of this receipt, but named in the duplicate check,
	// with unvouchedWhy, the signature that failed. Not kept with the row.
	unvouchedFirst, unvouchedWhy string
}

// SameReceipt reports whether r and o record the same receipt claims:
// grant, user, agent, brand, scopes used, actions (by tool and args hash)
// and time. Another encoding or signature of one receipt is the same;
// a receipt with other claims records another turn, even when it came
// with the same request JWT (PACT §3.2 lets an agent reuse its JWT within
// its lifetime, and lets a Provider not track replay).
func (r *Row) SameReceipt(o *Row) bool {
	if r.GrantID != o.GrantID || r.Principal != o.Principal || r.Agent.Platform != o.Agent.Platform || r.Brand != o.Brand ||
		!r.IssuedAt.Equal(o.IssuedAt) || !slices.Equal(r.ScopesUsed, o.ScopesUsed) || len(r.Actions) != len(o.Actions) {
		return false
	}
	for i := range r.Actions {
		if r.Actions[i].Tool != o.Actions[i].Tool || r.Actions[i].ArgsHash != o.Actions[i].ArgsHash {
			return false
		}
	}
	return true
}

// receiptKey names the row's receipt whichever of its encodings was
// posted: the lesser hash of the two an ECDSA signature has (r, s and
// r, n-s: docs/design/012), or the receipt's hash when it has one.
func (r *Row) receiptKey() string {
	key := strings.TrimPrefix(r.ReceiptID, "sha256:")
	if t := r.ReceiptTwinSHA256; t != "" && t < key {
		key = t
	}
	return key
}

// tools returns the tools of the row's actions, in order.
func (r *Row) tools() []string {
	tools := make([]string, len(r.Actions))
	for i, a := range r.Actions {
		tools[i] = a.Tool
	}
	return tools
}

// ReceiptVerified reports whether a signature vouches for the row's
// receipt: a receipt whose receipt_signature check passed at write time.
// Until then its claims (grant, principal, time, actions) are the
// writer's word.
func (r *Row) ReceiptVerified() bool {
	return r.Kind == KindReceipt && r.Verifier.passed(verifier.CheckReceiptSignature)
}

// IndexesRequestJWT reports whether row r takes the request-JWT index
// entry of its request JWT (Rows.RowByRequestJWT) when no row holds it
// yet: a row with a request JWT whose receipt signature and request
// signature did not fail. A copy no signature vouches for is never the
// first use of a request JWT (docs/design/012), nor is a receipt posted
// beside a request JWT that does not verify with it (another turn's, or
// one that had expired at its time): the receipts posted with the JWT
// after it are measured against the first row whose signatures held.
func IndexesRequestJWT(r *Row) bool {
	res := &verifier.Result{Checks: r.Verifier.Checks}
	return r.RequestJWTSHA256 != "" && !res.Failed(verifier.CheckReceiptSignature) && !res.Failed(verifier.CheckRequestSignature)
}

// KeepsNoEvidence reports whether r kept no evidence bundle: a receipt
// of the read-only class, which commitRow records so (EvidenceNotKept).
// The class is never changed once a row is written, and no other row is
// so marked: one that says so was edited in the row store, and the
// readers (the evidence view, VerifyRow, the sweep, the dispute drill)
// take it for the row that keeps its evidence it is, so that the edit
// hides nothing and the evidence it keeps is compared (fsck and the audit
// report the mark itself). The monthly drill's pool (Drillable) still
// leaves out any row so marked, as every store and migration decided it.
func (r *Row) KeepsNoEvidence() bool {
	return r.EvidenceNotKept != "" && r.Kind == KindReceipt && r.Class == retention.ReadOnly
}

// maxIssuedAhead is how far past the row's recording a signed ts still
// moves the start of its retention: the skew a refusal's observedAt is
// allowed (maxObservedAhead).
const maxIssuedAhead = maxObservedAhead

// RetentionStart is the time retention counts from: the later of the issue
// time and the time the ledger recorded the row, where the issue time
// counts only when a signature vouches for it (a receipt whose
// receipt_signature passed), and only up to an hour past the recording
// (maxIssuedAhead). A refusal's observedAt and a forged receipt's ts are
// claims: they never shorten how long the row is kept; and a signed ts
// far ahead (a Provider whose clock jumped, a brand signing ts 2525)
// never keeps a row, its evidence and its key sets under write-once
// retention for centuries.
//
// It is rounded up to a whole second, the resolution of write-once
// storage's retain-until: rounding can only lengthen retention.
func (r *Row) RetentionStart() time.Time {
	start := r.RecordedAt
	if r.Kind == KindReceipt && r.IssuedAt.After(r.RecordedAt) && r.Verifier.passed(verifier.CheckReceiptSignature) {
		start = r.IssuedAt
		if latest := r.RecordedAt.Add(maxIssuedAhead); start.After(latest) {
			start = latest
		}
	}
	if s := start.Truncate(time.Second); !s.Equal(start) {
		return s.Add(time.Second)
	}
	return start
}

// Targets returns the distinct action targets of the row.
func (r *Row) Targets() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range r.Actions {
		if a.Target != "" && !seen[a.Target] {
			seen[a.Target] = true
			out = append(out, a.Target)
		}
	}
	return out
}

// Evidence is the bundle of bytes a row was verified from. It is stored
// exactly as encoded at write time; the row keeps its SHA-256.
type Evidence struct {
	ReceiptJWS      string            `json:"receiptJws,omitempty"`
	RequestJWT      string            `json:"requestJwt,omitempty"`
	DelegationToken string            `json:"delegationToken,omitempty"`
	Actions         []verifier.Action `json:"actions,omitempty"`
	Limits          *Limits           `json:"limits,omitempty"`
	Refusal         *RefusalInput     `json:"refusal,omitempty"`
}

// Location says where one write-once object is held.
type Location struct {
	Store       string    `json:"store"`
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	VersionID   string    `json:"versionId,omitempty"`
	RetainUntil time.Time `json:"retainUntil"`
	Uploaded    bool      `json:"uploaded"`
	// Offset and Length locate a row's bundle inside a segment object;
	// Length is 0 for an object of its own.
	Offset uint32 `json:"offset,omitempty"`
	Length uint32 `json:"length,omitempty"`
	// LegalHold is true while an open incident holds the object.
	LegalHold bool `json:"legalHold,omitempty"`
}

// Object kinds in evidence storage.
const (
	ObjectEvidence = "evidence"
	ObjectJWKS     = "jwks"
)

// OutboxEntry is one object waiting to be written to evidence storage. Ref
// is the row id (evidence) or snapshot id (jwks) whose bytes it holds.
type OutboxEntry struct {
	Seq         uint64    `json:"seq"`
	Kind        string    `json:"kind"`
	Ref         string    `json:"ref"`
	Key         string    `json:"key"`
	RetainUntil time.Time `json:"retainUntil"`
	// Segment lets the uploader pack the object into a segment with others
	// of the same retention day; incident evidence is never packed, so a
	// legal hold on it holds nothing else.
	Segment bool `json:"segment,omitempty"`
	// Op is what to do with the object: put it (empty), or, once it is in
	// write-once storage, OpHold, OpRelease or OpExtend (to RetainUntil;
	// a row's bundle packed in a segment is put as an object of its own
	// instead, so that the segment's other rows go at their own dates).
	Op string `json:"op,omitempty"`
	// Hold puts the object under legal hold right after it is put.
	Hold bool `json:"hold,omitempty"`
	// SHA256 is the hex SHA-256 of the object's bytes as they were when
	// the entry was queued, for an object the uploader reads or builds
	// from the row store (a row's evidence bundle, a batch of access
	// records): it puts only those bytes, and moves the entry to the dead
	// letters when the row store's differ. Empty in entries queued before
	// it was recorded.
	SHA256 string `json:"sha256,omitempty"`
}

// Outbox operations on objects already in write-once storage.
const (
	OpHold    = "hold"
	OpRelease = "release"
	OpExtend  = "extend"
)

// EvidenceKey is the object key of a row's evidence bundle.
func EvidenceKey(rowID string) string { return "rows/" + rowID + ".json" }

// SnapshotKey is the object key of a JWKS snapshot.
func SnapshotKey(id string) string { return "jwks/" + id + ".json" }

// snapshotIDOf is the snapshot id SnapshotKey made key of, if it did.
func snapshotIDOf(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, "jwks/")
	if id, found := strings.CutSuffix(id, ".json"); ok && found && id != "" {
		return id, true
	}
	return "", false
}
