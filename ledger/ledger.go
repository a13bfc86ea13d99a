// Package ledger is the receipt ledger's domain: rows, the three rules
// (no verifiable receipt is unauthorized; scopes beyond the grant or an args
// hash mismatch is an incident; rows never change), dedupe, disputes, the
// write pipeline and the evidence outbox.
package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Input limits. Larger input is rejected before anything is stored.
const (
	MaxActions     = 64
	MaxArgsJSON    = 16 << 10
	MaxFieldLength = 512
	MaxNoteLength  = 4 << 10
)

// Config holds the ledger's optional settings.
type Config struct {
	// Policy is the retention policy; the zero value means DefaultPolicy.
	Policy retention.Policy
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics, when set, records operator metrics.
	Metrics *Metrics
	// Logger; default slog.Default().
	Logger *slog.Logger
	// SegmentSpan groups row bundles into one segment object by the span
	// their retain-until falls in; the segment is retained to the span's
	// end. Default 24h (a UTC day).
	SegmentSpan time.Duration
	// Leases tunes the leases singleton jobs run under and the claims of
	// outbox entries.
	Leases LeaseConfig
	// AccessRetention is the access log's retention (AccessLogConfig's):
	// CheckIntegrity does not report access records older than it missing
	// from the row store. The zero Period keeps them all.
	AccessRetention retention.Period
	// EvidenceCacheBytes bounds the cache of recent evidence bundles read
	// from (or just put in) write-once storage, which holds them once the
	// row store has dropped its copy; default DefaultEvidenceCacheBytes, a
	// negative value keeps none.
	EvidenceCacheBytes int
	// ReferenceClocks are clocks a retention sweep checks Now against
	// before it deletes anything: ledgerd gives the S3 evidence store's
	// and the PostgreSQL row store's. A sweep whose clock is ahead of one
	// by more than ClockTolerance, or that cannot read one, deletes
	// nothing (ErrClockAhead, ErrClockUnread). While RunClockWatch runs,
	// writes are refused when Now is off one by more than ClockTolerance
	// (ErrClockOff). None: the ledger trusts Now.
	ReferenceClocks []ReferenceClock
}

// Ledger records receipts and refusals and serves the read side.
type Ledger struct {
	store   Store
	objects ObjectStore
	v       *verifier.Verifier
	keys    verifier.KeySource
	cfg     Config
	notify  chan struct{}
	log     *logState // nil: no Merkle log
	// logElsewhere, on a ledger without the log, is when RunLogWatch found
	// that the row store keeps one (zero: not found).
	logElsewhere atomic.Int64
	held         heldLeases
	// sweeping admits one deleting sweep of this ledger at a time.
	sweeping chan struct{}
	recent   *bytesCache // nil: none
	clocks   clockWatch

	// listRead counts the index entries List and ListWithin read.
	listRead atomic.Int64
}

// New returns a Ledger over store, writing evidence objects to objects,
// verifying with v against the keys from keys.
func New(store Store, objects ObjectStore, v *verifier.Verifier, keys verifier.KeySource, cfg Config) (*Ledger, error) {
	if store == nil || objects == nil || v == nil || keys == nil {
		return nil, errors.New("ledger: store, objects, verifier and key source are required")
	}
	if cfg.Policy.Periods == nil {
		cfg.Policy = retention.DefaultPolicy()
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SegmentSpan <= 0 {
		cfg.SegmentSpan = 24 * time.Hour
	}
	cfg.Leases = cfg.Leases.withDefaults()
	if cfg.EvidenceCacheBytes == 0 {
		cfg.EvidenceCacheBytes = DefaultEvidenceCacheBytes
	}
	return &Ledger{store: store, objects: objects, v: v, keys: keys, cfg: cfg, notify: make(chan struct{}, 1), held: heldLeases{jobs: map[string]heldJob{}}, sweeping: make(chan struct{}, 1),
		recent: newBytesCache(cfg.EvidenceCacheBytes), clocks: clockWatch{recheck: make(chan struct{}, 1), states: map[string]ClockState{}, gaveTime: map[string]bool{}}}, nil
}

// Policy returns the retention policy in force.
func (l *Ledger) Policy() retention.Policy { return l.cfg.Policy }

// ReceiptInput is an AppendReceipt request.
type ReceiptInput struct {
	ReceiptJWS      string
	RequestJWT      string
	DelegationToken string
	Actions         []verifier.Action
	Limits          *Limits
	ContextID       string
	MessageID       string
	// Parsed, when set, is the input's tokens as Parse parsed them, for a
	// caller that read them before (AppendReceipts groups receipts by the
	// grant each names). AppendReceipt parses the tokens itself when it
	// is nil or was parsed from other tokens.
	Parsed *verifier.Parsed
}

// verifierInput is what the verifier reads of in.
func (in *ReceiptInput) verifierInput() verifier.Input {
	return verifier.Input{ReceiptJWS: in.ReceiptJWS, RequestJWT: in.RequestJWT, DelegationToken: in.DelegationToken, Actions: in.Actions}
}

// Parse parses in's tokens once, for AppendReceipt to read (Parsed).
func (in *ReceiptInput) Parse() *verifier.Parsed { return parseInput(in.verifierInput()) }

// parseInput parses an input's tokens (a test counts its calls).
var parseInput = verifier.Parse

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func checkField(name, v string, max int) error {
	if len(v) > max {
		return invalid("%s is longer than %d bytes", name, max)
	}
	return nulFree(name, v)
}

// checkText is checkField for a writer's words that ledgerctl and the
// console show: a name (an id, a tool, a target, a claimed principal or
// agent) or, with free, free text (a reason, a note). Besides a NUL and an
// overlong value it refuses a control character (termtext.Control: C0 and
// C1 controls, DEL, a bidirectional embedding, override or isolate, the
// line and paragraph separators), which could make a terminal show a row
// that the record does not hold; free text may hold tabs and line breaks
// (a line feed, or a CR and a line feed), no other. A name may hold no
// invisible character either (termtext.Invisible: a zero-width space, a
// direction mark), which would make it look like another. The error
// names the field and shows the character escaped, never raw.
func checkText(name, v string, max int, free bool) error {
	if err := checkField(name, v, max); err != nil {
		return err
	}
	i := termtext.Find(v, free)
	if i < 0 {
		return nil
	}
	r, _ := utf8.DecodeRuneInString(v[i:])
	if !termtext.Control(r) {
		return invalid("%s contains an invisible character (%s at byte %d): a name may hold no character drawn as nothing or as a blank (a zero-width space, a direction mark, a byte order mark, a soft hyphen), since it would look like another name",
			name, termtext.Escape(string(r)), i)
	}
	if free {
		return invalid("%s contains a control character (%s at byte %d): free text may hold tabs and line breaks, no other control character, bidirectional override or line separator",
			name, termtext.Escape(string(r)), i)
	}
	return invalid("%s contains a control character (%s at byte %d): it may hold no control character (a tab or a line break among them), bidirectional override or line separator",
		name, termtext.Escape(string(r)), i)
}

// CheckName is what the ledger requires of a name a caller gives it to
// look up or show (a drill's target or principal), as of a writer's name
// (checkText): at most MaxFieldLength bytes, no NUL, no control or
// invisible character. The error wraps ErrInvalid and names the field.
func CheckName(name, v string) error { return checkText(name, v, MaxFieldLength, false) }

// checkHeaderKid refuses a token (raw, the field name) whose header's
// kid holds what a name may not (checkText): no signature covers a
// header's kid until the key it names is found, and the row keeps it
// (the request JWT's kid, shown beside the agent platform).
func checkHeaderKid(name, raw string) error {
	c, err := verifier.ParseCompact(raw)
	if raw == "" || err != nil {
		return nil
	}
	return checkText(name+": its header's kid", c.Kid, MaxFieldLength, false)
}

// CheckRequestJWT applies the rules the ledger holds a personal agent's
// request JWT (raw) to, when it comes with a receipt or a refusal, besides
// its verification: at most verifier.MaxTokenBytes, in the one canonical
// encoding (RFC 7515 §2), and a header kid that is a name (checkText). A
// Provider checks the JWT it serves under with it, with CheckName for the
// JWT's iss, which a refusal records as its claimed agent: a turn served
// under a JWT the ledger refuses would leave an action, or a refusal, the
// ledger holds no row of. The error wraps ErrInvalid and names the field.
func CheckRequestJWT(raw string) error {
	if err := checkField("requestJwt", raw, verifier.MaxTokenBytes); err != nil {
		return err
	}
	if _, err := verifier.ParseToken(raw).Compact(); errors.Is(err, verifier.ErrNotCanonical) {
		return invalid("requestJwt: %v", err)
	}
	return checkHeaderKid("requestJwt", raw)
}

// nulFree refuses values holding a NUL byte, named name: posted fields
// (checkField) and signed claims that become a row's fields. A store's
// text columns cannot hold one (PostgreSQL), and every stored row must
// read back from every store (docs/design/012, rule 3).
func nulFree(name string, vs ...string) error {
	for _, v := range vs {
		if strings.IndexByte(v, 0) >= 0 {
			return invalid("%s contains a NUL byte", name)
		}
	}
	return nil
}

// validate checks in, whose tokens p holds parsed.
func (in *ReceiptInput) validate(p *verifier.Parsed) error {
	if in.ReceiptJWS == "" {
		return invalid("receiptJws is required")
	}
	for _, f := range [...]struct{ name, v string }{{"receiptJws", in.ReceiptJWS}, {"requestJwt", in.RequestJWT}, {"delegationToken", in.DelegationToken}} {
		if err := checkField(f.name, f.v, verifier.MaxTokenBytes); err != nil {
			return err
		}
	}
	for _, f := range [...]struct {
		name string
		tok  verifier.Token
	}{{"receiptJws", p.ReceiptJWS()}, {"requestJwt", p.RequestJWT()}, {"delegationToken", p.DelegationToken()}} {
		// A token a writer re-encoded is refused, like a re-encoded receipt
		// (RFC 7515 §2): dedupe then only has ES256 signatures to fold.
		// (The receipt's own encoding is checked where it is parsed.)
		if _, err := f.tok.Compact(); f.name != "receiptJws" && f.tok.Raw() != "" && errors.Is(err, verifier.ErrNotCanonical) {
			return invalid("%s: %v", f.name, err)
		}
		if c, err := f.tok.Compact(); err == nil {
			if err := checkText(f.name+": its header's kid", c.Kid, MaxFieldLength, false); err != nil {
				return err
			}
		}
	}
	for _, f := range [...]struct{ name, v string }{{"contextId", in.ContextID}, {"messageId", in.MessageID}} {
		if err := checkText(f.name, f.v, MaxFieldLength, false); err != nil {
			return err
		}
	}
	if err := CheckActions(in.Actions); err != nil {
		return err
	}
	if in.Limits != nil {
		if in.Limits.CountMax < 0 {
			return invalid("limits.countMax must not be negative")
		}
		if err := checkText("limits.amountMax", in.Limits.AmountMax, MaxFieldLength, false); err != nil {
			return err
		}
	}
	return nil
}

// CheckActions applies AppendReceipt's rules for a receipt's action log
// entries, the ones a writer's own input fills: at most MaxActions, each
// with a tool, tool and target within MaxFieldLength and without a NUL or
// another control character (checkText), args within MaxArgsJSON, all of
// it UTF-8 (the API's text: a request holding other bytes is refused
// before it reaches the ledger). An error wraps ErrInvalid: AppendReceipt
// refuses the receipt. A writer that signs receipts checks them first, so
// that it signs none the ledger cannot record.
func CheckActions(actions []verifier.Action) error {
	if len(actions) > MaxActions {
		return invalid("more than %d actions", MaxActions)
	}
	for i, a := range actions {
		if a.Tool == "" {
			return invalid("actions[%d].tool is required", i)
		}
		if err := checkText(fmt.Sprintf("actions[%d].tool", i), a.Tool, MaxFieldLength, false); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("actions[%d].target", i), a.Target, MaxFieldLength, false); err != nil {
			return err
		}
		if len(a.ArgsJSON) > MaxArgsJSON {
			return invalid("actions[%d].argsJson is longer than %d bytes", i, MaxArgsJSON)
		}
		if !utf8.ValidString(a.Tool) || !utf8.ValidString(a.Target) || !utf8.ValidString(a.ArgsJSON) {
			return invalid("actions[%d] holds text that is not UTF-8", i)
		}
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AppendReceipt verifies in as of the receipt's ts and records one row. It
// returns an error wrapping ErrInvalid, with nothing stored, only when the
// input cannot be parsed; every failed check is recorded as a row.
func (l *Ledger) AppendReceipt(ctx context.Context, in ReceiptInput) (*Row, Outcome, error) {
	// The clock is checked once, by the time the row is stamped with
	// (newReceiptRow's caller): a check costs a read of the boot-time
	// clock, a system call.
	// Each token is parsed once, here or by the caller (in.Parsed): the
	// checks below, the verifier, dedupe and the leaf read this parse.
	p := in.Parsed
	if !p.Of(in.verifierInput()) {
		p = in.Parse()
	}
	if err := in.validate(p); err != nil {
		return nil, 0, err
	}
	rc, err := p.Receipt()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: receiptJws: %v", ErrInvalid, err)
	}
	if err := nulFree("receiptJws: a claim", append([]string{rc.GrantID, rc.User, rc.PA, rc.Brand}, rc.ScopesUsed...)...); err != nil {
		return nil, 0, err
	}
	ev := Evidence{ReceiptJWS: in.ReceiptJWS, RequestJWT: in.RequestJWT, DelegationToken: in.DelegationToken, Actions: in.Actions, Limits: in.Limits}
	bundle, err := ev.AppendJSON(make([]byte, 0, bundleSize(in)))
	if err != nil {
		return nil, 0, fmt.Errorf("encode evidence: %w", err)
	}
	evSHA := sha256Hex(bundle)
	// Every encoding of the same signed receipt: the posted bytes first.
	receiptSHAs := p.ReceiptJWS().Encodings()
	receiptSHA := receiptSHAs[0]

	// A byte-identical resubmission, or a receipt whose row was swept, needs
	// no verification.
	var existing *Row
	err = l.store.View(ctx, func(tx Tx) error {
		if err := prefetch(tx, Prefetch{Rows: []string{receiptSHA, evSHA}, Tombstones: receiptSHAs}); err != nil {
			return err
		}
		found, _, ferr := findResubmission(tx, receiptSHA, evSHA)
		if ferr != nil || found != nil {
			existing = found
			return ferr
		}
		return sweptReceipt(tx, receiptSHAs)
	})
	if err != nil {
		return nil, 0, err
	}
	if existing != nil {
		l.cfg.Metrics.write(AlreadyRecorded, existing.Status)
		return existing, AlreadyRecorded, nil
	}

	start := time.Now()
	res, err := l.v.VerifyParsed(ctx, p, l.keys)
	switch {
	case errors.Is(err, verifier.ErrUndecided):
		// Nothing is recorded: a verdict taken while keys cannot be fetched
		// would be permanent. The writer retries (docs/design/009).
		return nil, 0, fmt.Errorf("%w: %v", ErrKeysUnavailable, err)
	case err != nil:
		return nil, 0, fmt.Errorf("%w: receiptJws: %v", ErrInvalid, err)
	}
	l.cfg.Metrics.verified(time.Since(start))
	if err := nulFree("the agent's issuer", res.AgentIssuer); err != nil {
		return nil, 0, err
	}

	requestSHAs := p.RequestJWT().Encodings()
	// The leaf's token digests: outside the serial commit.
	var digests tokenDigests
	if l.log != nil {
		digests = tokenDigests{receipt: tokenDigestFrom(p.ReceiptJWS(), receiptSHAs), request: tokenDigestFrom(p.RequestJWT(), requestSHAs), token: tokenDigestOf(p.DelegationToken())}
	}
	var (
		row     *Row
		outcome Outcome
	)
	// What the write reads, for a store that reads ahead: the rows and
	// tombstones of every encoding of the receipt, the request JWT's index
	// entries and the grant's revocation.
	ahead := Prefetch{Rows: append([]string{evSHA}, receiptSHAs...), Tombstones: append([]string{evSHA}, receiptSHAs...), RequestJWTs: requestSHAs, Grant: rc.GrantID}
	// A receipt that counts the rows under its grant holds the grant
	// first, before its reads lock anything, as RevokeGrant and the sweep
	// do (withinLimits).
	counts := in.Limits != nil && in.Limits.CountMax > 0 && rc.GrantID != ""
	err = l.store.Update(ctx, func(tx Tx) error {
		row, outcome = nil, 0
		if counts {
			if err := tx.HoldGrants(rc.GrantID); err != nil {
				return err
			}
		}
		if err := prefetch(tx, ahead); err != nil {
			return err
		}
		prev, receiptRow, err := findResubmission(tx, receiptSHA, evSHA)
		if err != nil {
			return err
		}
		if prev != nil {
			row, outcome = prev, AlreadyRecorded
			return nil
		}
		// A receipt whose row was swept is not recorded again.
		if err := sweptReceipt(tx, receiptSHAs); err != nil {
			return err
		}
		r := l.newReceiptRow(rc, res, in, receiptSHA, evSHA, requestSHAs[0])
		// Checked by the time it is recorded at, in the transaction: a
		// check on the way in would miss a step during the verification
		// (a key fetch) or the wait for a commit.
		if err := l.checkWriteClock(ctx, r.RecordedAt); err != nil {
			return err
		}
		if in.RequestJWT != "" && len(requestSHAs) > 1 {
			r.RequestJWTTwinSHA256 = requestSHAs[1]
		}
		if len(receiptSHAs) > 1 {
			r.ReceiptTwinSHA256 = receiptSHAs[1]
		}
		if err := l.dedupe(tx, r, receiptRow, receiptSHAs[1:], requestSHAs); err != nil {
			return err
		}
		// Nor is a duplicate row, named by its evidence, once swept
		// (a shorter class than the receipt's first row).
		if r.ID == evSHA {
			if err := sweptRow(tx, evSHA); err != nil {
				return err
			}
		}
		limits, err := withinLimits(tx, r, in.Limits, in.Actions)
		if err != nil {
			return err
		}
		revoked, err := grantCheck(tx, r.GrantID, r.IssuedAt)
		if err != nil {
			return err
		}
		r.Verifier.Checks = append(r.Verifier.Checks, limits, duplicateCheck(r), revoked)
		if err := l.classify(tx, r); err != nil {
			return err
		}
		if err := l.commitRow(tx, r, bundle, digests, res.BrandSnapshot, res.AgentSnapshot); err != nil {
			return err
		}
		row, outcome = r, Created
		if r.Verifier.DuplicateOf != "" {
			outcome = DuplicateRecorded
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	l.cfg.Metrics.write(outcome, row.Status)
	if outcome != AlreadyRecorded {
		l.wake()
		l.wakeLog()
		if row.Status == Incident {
			l.cfg.Logger.WarnContext(ctx, "incident recorded", slog.String("row", row.ID), slog.String("incident", row.IncidentID), slog.String("agent", row.Agent.Platform))
		}
		if len(row.UnclassifiedTools) > 0 {
			l.cfg.Metrics.unclassified()
			l.cfg.Logger.WarnContext(ctx, "tools missing from the retention table; the row took the longest class",
				slog.String("row", row.ID), slog.Any("tools", row.UnclassifiedTools))
		}
	}
	return row, outcome, nil
}

// bundleSize is about the length of in's evidence bundle: its tokens and
// actions with their keys, when no string needs escapes.
func bundleSize(in ReceiptInput) int {
	n := len(in.ReceiptJWS) + len(in.RequestJWT) + len(in.DelegationToken) + 160
	for _, a := range in.Actions {
		n += len(a.Tool) + len(a.Target) + len(a.ArgsJSON) + 40
	}
	return n
}

// sweptReceipt returns an ExpiredError when the row of any encoding of the
// receipt was swept: a receipt is not recorded again once retention ends.
func sweptReceipt(tx Tx, receiptSHAs []string) error {
	for _, sha := range receiptSHAs {
		if err := sweptRow(tx, sha); err != nil {
			return err
		}
	}
	return nil
}

// sweptRow returns an ExpiredError when row id was swept: an id is never
// given to a new row once swept, since its tombstone and its leaf in the
// log stay.
func sweptRow(tx Tx, id string) error {
	t, err := tx.Tombstone(id)
	switch {
	case err == nil:
		return &ExpiredError{Tombstone: *t}
	case errors.Is(err, ErrNotFound):
		return nil
	}
	return err
}

// findResubmission returns the row already recorded for exactly this
// evidence: the primary row of the receipt, or its duplicate row; and
// whether a row of the receipt (the primary row, its id receiptSHA) exists,
// with this evidence or other.
func findResubmission(tx Tx, receiptSHA, evSHA string) (*Row, bool, error) {
	receiptRow := false
	for _, id := range []string{receiptSHA, evSHA} {
		r, err := tx.Row(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		receiptRow = receiptRow || id == receiptSHA
		if r.EvidenceSHA256 == evSHA {
			return r, receiptRow, nil
		}
	}
	return nil, receiptRow, nil
}

// newReceiptRow is the row of a receipt; requestSHA is the hex SHA-256 of
// the request JWT as posted.
func (l *Ledger) newReceiptRow(rc verifier.Receipt, res *verifier.Result, in ReceiptInput, receiptSHA, evSHA, requestSHA string) *Row {
	r := receiptRowOf(rc, res, in, receiptSHA, evSHA, requestSHA)
	now := l.cfg.Now().UTC()
	r.Verifier.CheckedBy = l.v.CheckedBy()
	r.Verifier.CheckedAt = now
	r.RecordedAt = now
	return r
}

// receiptRowOf is the row of receipt rc with the checks res gives, as the
// write path builds it from what was posted (in), without what only the
// ledger's verifier and clock give: who checked it and when, and when it
// was recorded (newReceiptRow).
func receiptRowOf(rc verifier.Receipt, res *verifier.Result, in ReceiptInput, receiptSHA, evSHA, requestSHA string) *Row {
	r := &Row{
		ID:             receiptSHA,
		ReceiptID:      "sha256:" + receiptSHA,
		Kind:           KindReceipt,
		GrantID:        rc.GrantID,
		Principal:      rc.User,
		Brand:          rc.Brand,
		Agent:          Agent{Platform: rc.PA, RequestJWTKid: res.RequestKid},
		BrandKey:       BrandKey{Kid: res.ReceiptKid},
		ScopeGranted:   res.ScopeGranted,
		ScopesUsed:     rc.ScopesUsed,
		Actions:        res.Actions,
		IssuedAt:       rc.Time,
		Verifier:       Record{Checks: res.Checks},
		Dispute:        DisputeNone,
		EvidenceSHA256: evSHA,
		ContextID:      in.ContextID,
		MessageID:      in.MessageID,
	}
	if r.Agent.Platform == "" {
		r.Agent.Platform = res.AgentIssuer
	}
	if res.AgentSnapshot != nil {
		r.Agent.JWKSSnapshot = res.AgentSnapshot.ID
	}
	if res.BrandSnapshot != nil {
		r.BrandKey.JWKSSnapshot = res.BrandSnapshot.ID
	}
	if in.Limits != nil {
		r.Limits = Limits{AmountMax: in.Limits.AmountMax, CountMax: in.Limits.CountMax}
	}
	r.Limits.GrantExpires = res.GrantExpires
	if in.RequestJWT != "" {
		r.RequestJWTSHA256 = requestSHA
	}
	return r
}

// dedupe applies API.md's duplicate rule on what was signed, not on the
// bytes as posted: the same receipt (byte-identical with other evidence,
// recorded true: findResubmission found its row in this transaction; or
// another encoding of it: otherReceipt lists the row ids of those) is
// recorded as its own row naming the earlier one; so is a receipt whose
// request JWT (any of its encodings, requestSHAs) an earlier row used,
// unless that row's receipt or request signature failed and this one's
// receipt signature passed: a copy no signature vouches for is never the
// original of a receipt one does, whoever posted it first, nor is a
// receipt posted beside a request JWT that does not verify with it
// (docs/design/012). Such a row takes no
// request-JWT entry (IndexesRequestJWT); one an earlier version recorded
// may hold one, and is passed over: row r then takes that entry over
// (RequestJWTTakenFrom), so that the receipts posted with the request JWT
// after r are measured against r. Another encoding of the same receipt
// carries the same signature, so it is a duplicate either way.
func (l *Ledger) dedupe(tx Tx, r *Row, recorded bool, otherReceipt, requestSHAs []string) error {
	if recorded {
		r.Verifier.DuplicateOf = r.ID
		r.ID = r.EvidenceSHA256
		return nil
	}
	for _, id := range otherReceipt {
		_, err := tx.Row(id)
		switch {
		case err == nil:
			r.Verifier.DuplicateOf = id
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if r.RequestJWTSHA256 == "" {
		return nil
	}
	for _, sha := range requestSHAs {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil {
			return err
		}
		if first != "" && first != r.ID {
			// The row named, read (and locked where the store locks what
			// a write reads): a sweep removing it has ended, and the row
			// and its entry are gone, or it waits for this write.
			orig, err := tx.Row(first)
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			}
			if r.ReceiptVerified() && !IndexesRequestJWT(orig) {
				// The other encoding's entry may name a row that counts.
				if r.unvouchedFirst == "" {
					r.unvouchedFirst, r.unvouchedWhy = first, "receipt signature"
					if orig.ReceiptVerified() {
						r.unvouchedWhy = "request JWT's signature"
					}
				}
				if r.RequestJWTTakenFrom == nil {
					r.RequestJWTTakenFrom = map[string]string{}
				}
				r.RequestJWTTakenFrom[sha] = first
				continue
			}
			// A duplicate takes no entry over.
			r.RequestJWTTakenFrom = nil
			r.Verifier.DuplicateOf = first
			r.countsToo = !r.SameReceipt(orig) || !orig.ReceiptVerified()
			return nil
		}
	}
	return nil
}

// duplicateCheck is the duplicate check of row r, once deduped.
func duplicateCheck(r *Row) verifier.Check {
	switch {
	case r.Verifier.DuplicateOf != "":
		return verifier.Check{Name: verifier.CheckDuplicate, Result: verifier.Fail, Detail: "duplicate of row " + r.Verifier.DuplicateOf}
	case r.unvouchedFirst != "":
		return verifier.Check{Name: verifier.CheckDuplicate, Result: verifier.Pass,
			Detail: "receipt hash not seen before; the request JWT was first used by row " + r.unvouchedFirst + ", whose " + r.unvouchedWhy + " failed: no earlier record of this receipt"}
	}
	return verifier.Check{Name: verifier.CheckDuplicate, Result: verifier.Pass, Detail: "receipt hash and request JWT not seen before"}
}

// withinLimits evaluates what the writer's limits make checkable: countMax
// against rows already recorded under the grant for each tool, amountMax
// against a numeric amount in the args.
func withinLimits(tx Tx, r *Row, lim *Limits, actions []verifier.Action) (verifier.Check, error) {
	const name = verifier.CheckWithinLimits
	if lim == nil || (lim.CountMax == 0 && lim.AmountMax == "") {
		return verifier.Check{Name: name, Result: verifier.Skipped, Detail: "the writer recorded no limits"}, nil
	}
	var done, skipped, problems []string
	if lim.CountMax > 0 {
		counted := map[string]int{}
		for _, a := range r.Actions {
			counted[a.Tool]++
		}
		var prior map[string]int
		if r.GrantID != "" && (r.Verifier.DuplicateOf == "" || r.countsToo) {
			// The grant is held (AppendReceipt), so that another write
			// under it at once does not count without this row, nor this
			// one without it.
			var err error
			if prior, err = grantToolCounts(tx, r.GrantID, lim.CountMax); err != nil {
				return verifier.Check{}, err
			}
		}
		for _, tool := range slices.Sorted(maps.Keys(counted)) {
			n := prior[tool] + counted[tool]
			if n > lim.CountMax {
				problems = append(problems, fmt.Sprintf("%s: %d under grant %s, countMax %d", tool, n, r.GrantID, lim.CountMax))
			} else {
				done = append(done, fmt.Sprintf("%s %d of %d", tool, n, lim.CountMax))
			}
		}
		if len(counted) == 0 {
			skipped = append(skipped, "countMax: the receipt lists no actions")
		}
	}
	if lim.AmountMax != "" {
		max, ok := decimal(lim.AmountMax)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("amountMax %q is not a finite decimal number", lim.AmountMax))
		} else {
			found := false
			for _, a := range actions {
				amount, ok := numericAmount(a.ArgsJSON)
				if !ok {
					continue
				}
				found = true
				if amount > max {
					problems = append(problems, fmt.Sprintf("%s: amount %g over amountMax %g", a.Tool, amount, max))
				} else {
					done = append(done, fmt.Sprintf("%s amount %g within %g", a.Tool, amount, max))
				}
			}
			if !found {
				skipped = append(skipped, "amountMax: no numeric amount in the args")
			}
		}
	}
	switch {
	case len(problems) > 0:
		return verifier.Check{Name: name, Result: verifier.Fail, Detail: strings.Join(problems, "; ")}, nil
	case len(skipped) > 0:
		return verifier.Check{Name: name, Result: verifier.Skipped, Detail: strings.Join(append(skipped, done...), "; ")}, nil
	}
	return verifier.Check{Name: name, Result: verifier.Pass, Detail: strings.Join(done, "; ")}, nil
}

// grantToolCounts counts, per tool, the actions of the receipt rows already
// recorded under grant, from the stores' index of the grant's rows that
// can count (Query.Signed). Only receipts whose signature passed count: a
// grant id is a claim until the Brand's signature vouches for it, and a
// forged row must not use up a grant's count, nor be read at all: any
// writer can post such rows under a customer's grant, and the count is
// read while the row store's write lock is held (docs/design/012). A
// duplicate counts only when it records another turn than its earlier row
// (SameReceipt), whatever its status; when that row is gone, or no
// signature vouched for it, the duplicates of one receipt count once. It
// stops once any tool passes stopAbove: the limit is exceeded either way.
func grantToolCounts(tx Tx, grant string, stopAbove int) (map[string]int, error) {
	counts := map[string]int{}
	orphans := map[string][]*Row{} // counted duplicates of rows gone, by the row they name
	q := Query{GrantID: grant, Signed: true, PageSize: 1000}
	for {
		rows, next, err := tx.List(q)
		if err != nil {
			return nil, err
		}
	rows:
		for _, row := range rows {
			if !row.ReceiptVerified() {
				continue // the index holds none; checked all the same
			}
			if of := row.Verifier.DuplicateOf; of != "" {
				orig, err := tx.Row(of)
				if err != nil && !errors.Is(err, ErrNotFound) {
					return nil, err
				}
				switch {
				case err == nil && !row.SameReceipt(orig):
					// Another turn: it counts.
				case err == nil && orig.Verifier.passed(verifier.CheckReceiptSignature):
					continue // counted with its earlier row
				default:
					// The same receipt as a row gone, or one no signature
					// vouched for (a forged copy posted first): its
					// duplicates count once.
					for _, o := range orphans[of] {
						if row.SameReceipt(o) {
							continue rows
						}
					}
					orphans[of] = append(orphans[of], row)
				}
			}
			for _, a := range row.Actions {
				counts[a.Tool]++
				if counts[a.Tool] > stopAbove {
					return counts, nil
				}
			}
		}
		if next == "" {
			return counts, nil
		}
		q.PageToken = next
	}
}

// decimalNumber is a finite decimal number as JSON writes one (no NaN,
// Inf, hex, underscores or leading '+').
var decimalNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// decimal parses a limit: a finite decimal number, or false.
func decimal(s string) (float64, bool) {
	if !decimalNumber.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func numericAmount(argsJSON string) (float64, bool) {
	if argsJSON == "" {
		return 0, false
	}
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(argsJSON), &args) != nil {
		return 0, false
	}
	raw, ok := args["amount"]
	if !ok {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return decimal(n.String())
}

// unauthorizedChecks are the checks whose failure means no verifiable
// receipt (rule 1).
var unauthorizedChecks = []string{verifier.CheckReceiptSignature, verifier.CheckRequestSignature, verifier.CheckDelegationToken, verifier.CheckBindings}

// incidentChecks are the checks whose failure is an incident (rule 2).
var incidentChecks = []string{verifier.CheckScopesWithin, verifier.CheckArgsHash, verifier.CheckWithinLimits, verifier.CheckGrantNotRevoked}

// statusOf is the status a receipt's row gets from its verifier record:
// rule 1, then rule 2, then a duplicate.
func statusOf(v Record) Status {
	res := verifier.Result{Checks: v.Checks}
	switch {
	case res.Failed(unauthorizedChecks...):
		return Unauthorized
	case res.Failed(incidentChecks...):
		return Incident
	case v.DuplicateOf != "":
		return Duplicate
	}
	return Authorized
}

// classify sets status, incident id and retention.
func (l *Ledger) classify(tx Tx, r *Row) error {
	r.Status = statusOf(r.Verifier)
	if r.Status == Incident && r.Verifier.DuplicateOf != "" {
		had, err := firstIncident(tx, r)
		if err != nil {
			return err
		}
		if had {
			r.Status = Duplicate
			for i, c := range r.Verifier.Checks {
				if c.Name == verifier.CheckDuplicate {
					r.Verifier.Checks[i].Detail += "; " + repeatOfIncident
				}
			}
		}
	}
	switch r.Status {
	case Incident:
		seq, err := tx.NextIncidentSeq()
		if err != nil {
			return err
		}
		r.IncidentID = IncidentID(seq)
		r.Class = retention.Incident
	case Unauthorized:
		r.Class = retention.Refused
		// A receipt the Brand's signature vouches for records an action
		// that ran, whatever else failed (the token, the bindings): its row
		// is never kept shorter than its actions and scopes used imply
		// (docs/design/012), or a writer posting it first with another
		// grant's token would have the proof of a refund gone at twelve
		// months. A read-only class keeps no evidence: never taken here. A
		// repeat of a receipt already recorded is not the record of the
		// action (its first row is): it keeps the refused class's period.
		// A row that names another receipt's row as its first (posted
		// with that row's request JWT) is the first record of its own
		// receipt, and is kept as long as its actions imply.
		if r.ReceiptVerified() {
			repeat, err := repeatsItsReceipt(tx, r)
			if err != nil {
				return err
			}
			start := r.RetentionStart()
			c, unknown := l.cfg.Policy.Classify(r.tools(), r.ScopesUsed, start)
			if !repeat && c != retention.ReadOnly && l.cfg.Policy.RetainUntil(c, start).After(l.cfg.Policy.RetainUntil(retention.Refused, start)) {
				r.Class, r.UnclassifiedTools = c, unknown
			}
		}
	default:
		r.Class, r.UnclassifiedTools = l.cfg.Policy.Classify(r.tools(), r.ScopesUsed, r.RetentionStart())
	}
	r.RetainUntil = l.cfg.Policy.RetainUntil(r.Class, r.RetentionStart())
	return nil
}

// repeatsItsReceipt reports whether row r is a duplicate of an earlier
// row of the same receipt (SameReceipt): another post of it, in the same
// or another encoding. A row whose first row (DuplicateOf) records another
// receipt shares only its request JWT with it, and one whose first row
// cannot be read is taken as no repeat, so that neither is kept shorter
// than its own actions imply.
func repeatsItsReceipt(tx Tx, r *Row) (bool, error) {
	if r.Verifier.DuplicateOf == "" {
		return false, nil
	}
	orig, err := firstOfItsReceipt(tx, r)
	return orig != nil, err
}

// firstOfItsReceipt is the row r names as its first (DuplicateOf) when
// that row is of the same receipt (SameReceipt); nil when it is another
// receipt's or cannot be found.
func firstOfItsReceipt(tx Tx, r *Row) (*Row, error) {
	orig, err := tx.Row(r.Verifier.DuplicateOf)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !r.SameReceipt(orig):
		return nil, nil
	}
	return orig, nil
}

// repeatOfIncident ends the duplicate check's detail of a repeat that
// failed a check of rule 2 and opened no incident (firstIncident).
const repeatOfIncident = "an earlier row of this receipt opened its incident, so this repeat opens none"

// firstIncident reports whether the receipt that row r repeats (r names
// its first row, DuplicateOf) already has its incident, opened by a row of
// either of its encodings or by an earlier repeat of it; when it has
// none, r takes it (RefRepeatIncident, under the receipt's key) and opens
// it. A repeat is no record of an action of its own: whatever made it
// fail a check of rule 2 that its first row passed (limits, an action
// log, a revocation dated back) came from the writer, and the receipt's
// incident, if any, already holds it. Without this, one signed turn
// posted again and again with other limits opened an incident each time,
// each holding the agent platform's rows of that day and the grant's rows
// (docs/design/012). A row whose first row is another receipt (a request
// JWT reused for a second turn) is a second action, not a repeat, and
// opens its own incident; so does one whose first row cannot be read.
func firstIncident(tx Tx, r *Row) (bool, error) {
	orig, err := firstOfItsReceipt(tx, r)
	switch {
	case err != nil || orig == nil:
		return false, err
	case orig.Status == Incident:
		return true, nil
	}
	key := r.receiptKey()
	for _, id := range []string{strings.TrimPrefix(r.ReceiptID, "sha256:"), r.ReceiptTwinSHA256} {
		if id == "" || id == orig.ID {
			continue
		}
		switch row, err := tx.Row(id); {
		case err == nil && row.Status == Incident:
			return true, nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return false, err
		}
	}
	n, err := tx.Count(RefRepeatIncident, key, 1)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return false, nil
	}
	_, err = tx.Count(RefRepeatIncident, key, -1)
	return true, err
}

// commitRow writes the row, its evidence, new snapshots and their outbox
// entries in tx.
func (l *Ledger) commitRow(tx Tx, r *Row, bundle []byte, digests tokenDigests, snaps ...*verifier.Snapshot) error {
	objRetain := l.cfg.Policy.ObjectRetainUntil(r.Class, r.RetentionStart())
	incident := r.Class == retention.Incident
	if r.Class == retention.ReadOnly && r.Kind == KindReceipt {
		// Playbook step 5: a read-only row keeps the receipt hash, the
		// verifier result and the scopes used; the receipt, tokens and args
		// (personal data) are not kept.
		r.EvidenceNotKept = "read-only class: the receipt, tokens and args are not kept (personal data stays short-lived)"
	}
	if err := AddRow(tx, r); err != nil {
		return err
	}
	now := l.cfg.Now()
	if l.log != nil {
		if err := tx.QueueLeaf(r.ID, rowLeafOf(r, digests)); err != nil {
			return err
		}
	} else if err := l.checkNoLogElsewhere(tx); err != nil {
		return err
	}
	if r.EvidenceNotKept == "" {
		if err := tx.PutEvidence(r.ID, bundle); err != nil {
			return err
		}
		// The entry keeps the bundle's write-time hash: the uploader puts
		// the bundle only when it still hashes to it.
		if err := tx.Enqueue(OutboxEntry{Kind: ObjectEvidence, Ref: r.ID, Key: EvidenceKey(r.ID), RetainUntil: objRetain, Segment: !incident, Hold: incident,
			SHA256: r.EvidenceSHA256}, now); err != nil {
			return err
		}
	}
	// A snapshot outlives every row that names it: its object is kept at
	// least the longest receipt period from the latest row that names it.
	// It is put, or extended when a row needs more, for a day longer than
	// that row needs, so the rows of the next day are covered without an
	// extension each.
	start := r.RetentionStart()
	need := l.cfg.Policy.ObjectRetainUntil(l.cfg.Policy.Longest(start), start)
	if objRetain.After(need) {
		need = objRetain
	}
	snapRetain := need.Add(24 * time.Hour)
	seen := map[string]bool{}
	for _, s := range snaps {
		if s == nil || seen[s.ID] {
			continue
		}
		seen[s.ID] = true
		isNew, err := tx.PutSnapshot(*s)
		if err != nil {
			return err
		}
		cur, err := tx.SnapshotRetain(s.ID)
		if err != nil {
			return err
		}
		switch {
		case isNew:
			if err := tx.Enqueue(OutboxEntry{Kind: ObjectJWKS, Ref: s.ID, Key: SnapshotKey(s.ID), RetainUntil: snapRetain}, now); err != nil {
				return err
			}
		case need.After(cur):
			if err := tx.Enqueue(OutboxEntry{Op: OpExtend, Key: SnapshotKey(s.ID), RetainUntil: snapRetain}, now); err != nil {
				return err
			}
		default:
			continue
		}
		if err := tx.SetSnapshotRetain(s.ID, snapRetain); err != nil {
			return err
		}
	}
	if incident {
		return l.openIncident(tx, r)
	}
	return nil
}

// WakeUploader starts an upload round now, when the uploader runs, for
// objects queued outside the ledger (the access log's).
func (l *Ledger) WakeUploader() { l.wake() }

func (l *Ledger) wake() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}
