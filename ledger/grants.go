package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/verifier"
)

// Revocation is a grant's recorded revocation. PACT leaves revocation to the
// Provider (§5.5: "the grant is not revoked"); the ledger keeps the time so
// that a receipt issued after it is an incident at once.
type Revocation struct {
	RevokedAt  time.Time `json:"revokedAt"`
	By         string    `json:"by"`
	Note       string    `json:"note,omitempty"`
	RecordedAt time.Time `json:"recordedAt"`
	// AdminRevokedAt is the earliest time an admin recorded the grant
	// revoked as of (RevokeGrant with admin), zero when none did: an
	// operator's revocation, the one the embedded Provider acts on
	// (docs/design/038). A writer's (a Provider reporting its own
	// customers' revocations, or any writer key) makes receipts incidents
	// from RevokedAt but does not stop the Provider. Revocations recorded
	// before it was kept have none.
	AdminRevokedAt time.Time `json:"adminRevokedAt,omitzero"`
	// AdminBy, AdminNote and AdminRecordedAt are the admin's own record
	// of the revocation AdminRevokedAt is from: the key that recorded
	// it, its note and when the ledger recorded it. They are kept
	// whatever a writer records before or after it, beside the
	// revocation in force (By and Note are the earliest revocation's,
	// which may be a writer's). Revocations recorded before they were
	// kept have none, an AdminRevokedAt only.
	AdminBy         string    `json:"adminBy,omitempty"`
	AdminNote       string    `json:"adminNote,omitempty"`
	AdminRecordedAt time.Time `json:"adminRecordedAt,omitzero"`
	// ProviderStatements are Providers' signed statements of the
	// revocation (verifier.RevocationClaims), each checked with the keys
	// of the brand that signed it when it was recorded: the earliest of
	// each brand, in brand order. The embedded Provider honours one of its
	// own as it does an admin's, so that a copy of its store from before
	// the revocation does not serve the grant again (docs/design/045). A
	// writer key cannot make one, and a statement of one brand never
	// replaces another's: a Provider the ledger trusts cannot hide the
	// embedded Provider's.
	ProviderStatements []ProviderStatement `json:"providerStatements,omitempty"`
}

// ProviderStatement is a Provider's signed statement that it revoked a
// grant as of RevokedAt, checked with the keys of Brand (its interface
// URL) when the ledger recorded it, at RecordedAt.
type ProviderStatement struct {
	Brand     string    `json:"brand"`
	RevokedAt time.Time `json:"revokedAt"`
	Statement string    `json:"statement"`
	// RecordedAt is when the ledger recorded the statement: a statement
	// the Provider posts late may say a time long before it, and
	// ListRevocations' since lists it from when it was recorded too.
	// Zero in statements recorded before it was kept.
	RecordedAt time.Time `json:"recordedAt,omitzero"`
}

// EarliestStatement is the earliest of r's Provider statements whose
// brand and statement own says are a Provider's own, zero when none is.
func (r *Revocation) EarliestStatement(own func(ProviderStatement) bool) time.Time {
	var at time.Time
	for _, st := range r.ProviderStatements {
		if (at.IsZero() || st.RevokedAt.Before(at)) && own(st) {
			at = st.RevokedAt
		}
	}
	return at
}

// withStatement returns statements with st in place of any later one of
// its brand, and whether that changed them.
func withStatement(statements []ProviderStatement, st ProviderStatement) ([]ProviderStatement, bool) {
	i, found := slices.BinarySearchFunc(statements, st.Brand, func(e ProviderStatement, brand string) int { return strings.Compare(e.Brand, brand) })
	if found {
		if !st.RevokedAt.Before(statements[i].RevokedAt) {
			return statements, false
		}
		out := slices.Clone(statements)
		out[i] = st
		return out, true
	}
	return slices.Insert(slices.Clone(statements), i, st), true
}

// adminRecord is r's admin's record: AdminRevokedAt and the fields that go
// with it.
type adminRecord struct {
	at, recorded time.Time
	by, note     string
}

func (r *Revocation) admin() adminRecord {
	if r == nil {
		return adminRecord{}
	}
	return adminRecord{at: r.AdminRevokedAt, recorded: r.AdminRecordedAt, by: r.AdminBy, note: r.AdminNote}
}

func (r *Revocation) setAdmin(a adminRecord) {
	r.AdminRevokedAt, r.AdminRecordedAt, r.AdminBy, r.AdminNote = a.at, a.recorded, a.by, a.note
}

// RevokeGrant records that grant was revoked at (now when zero), reported
// by the key named by, which holds the admin role when admin is true. An
// earlier time than one already recorded replaces it; a later one is
// ignored, except that an admin's earlier than any admin's before sets
// AdminRevokedAt, with the admin's key name and note (AdminBy, AdminNote),
// which no writer's revocation changes. Rows already written do not
// change.
func (l *Ledger) RevokeGrant(ctx context.Context, grant string, at time.Time, note, by string, admin bool) (Revocation, error) {
	return l.RevokeGrantStated(ctx, grant, at, note, by, admin, "")
}

// RevokeGrantStated is RevokeGrant with the Provider's signed statement
// of the revocation (verifier.VerifyRevocation), when statement is not
// "": it must verify with the keys of a brand the ledger trusts, name
// grant, and say at (or at is zero and is taken from it); else nothing
// is recorded (invalid input, or ErrKeysUnavailable when the brand's keys
// cannot be fetched). The earliest statement of each brand is kept in
// ProviderStatements.
func (l *Ledger) RevokeGrantStated(ctx context.Context, grant string, at time.Time, note, by string, admin bool, statement string) (Revocation, error) {
	if grant == "" {
		return Revocation{}, invalid("grantId is required")
	}
	if err := checkText("grantId", grant, MaxFieldLength, false); err != nil {
		return Revocation{}, err
	}
	if err := checkText("note", note, MaxNoteLength, true); err != nil {
		return Revocation{}, err
	}
	var stated *ProviderStatement // the statement posted, checked
	if statement != "" {
		r, err := verifier.VerifyRevocation(ctx, statement, l.keys)
		switch {
		case errors.Is(err, verifier.ErrUndecided):
			return Revocation{}, fmt.Errorf("%w: providerStatement: %v", ErrKeysUnavailable, err)
		case err != nil:
			return Revocation{}, invalid("providerStatement: %v", err)
		case r.GrantID != grant:
			return Revocation{}, invalid("providerStatement is of grant %q, not %q", r.GrantID, grant)
		case !at.IsZero() && !at.Equal(r.RevokedAt):
			return Revocation{}, invalid("providerStatement says the grant was revoked at %s, revokedAt %s", r.RevokedAt.Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
		}
		at, stated = r.RevokedAt, &ProviderStatement{Brand: r.Brand, RevokedAt: r.RevokedAt, Statement: statement}
	}
	now := l.cfg.Now().UTC()
	if stated != nil {
		stated.RecordedAt = now
	}
	// Not refused for the clock (clockwatch.go): a compromised grant must
	// be stoppable while the clock is put right.
	if off := l.noteClockOff(ctx, now, slog.String("revocation_of_grant", grant)); off > 0 && at.IsZero() {
		// Ahead: in force from the reference's time, not the ledger's,
		// or receipts served meanwhile would pass as before it. (Behind,
		// now is already the earlier; a revocation too early only makes
		// more receipts incidents.)
		at = now.Add(-off)
	}
	if at.IsZero() {
		at = now
	}
	if !verifier.InRange(at) {
		return Revocation{}, invalid("revokedAt %s: want a time from %s to %s", at.UTC().Format(time.RFC3339), verifier.MinTime.Format(time.RFC3339), verifier.MaxTime.Format(time.RFC3339))
	}
	var out Revocation
	logged := false
	err := l.store.Update(ctx, func(tx Tx) error {
		logged = false
		// Held: a revocation of the grant at once, which this one would
		// not read as recorded yet, ends first, or waits for this one.
		if err := tx.HoldGrants(grant); err != nil {
			return err
		}
		prev, err := tx.Revocation(grant)
		if err != nil {
			return err
		}
		// The admin's record: a writer's revocation never changes it.
		adm := prev.admin()
		changed := false
		if admin && (adm.at.IsZero() || at.Before(adm.at)) {
			adm = adminRecord{at: at.UTC(), recorded: now, by: by, note: note}
			changed = true
		}
		// The Provider's statement: only an earlier one of the same
		// brand replaces it.
		var statements []ProviderStatement
		if prev != nil {
			statements = prev.ProviderStatements
		}
		stateChanged := false
		if stated != nil {
			statements, stateChanged = withStatement(statements, *stated)
		}
		if prev != nil && !at.Before(prev.RevokedAt) {
			// The earlier time stands; an admin's later than a writer's
			// is kept as the one that stops the Provider, and so is a
			// Provider's statement.
			out = *prev
			if !changed && !stateChanged {
				return nil
			}
		} else {
			out = Revocation{RevokedAt: at.UTC(), By: by, Note: note, RecordedAt: now}
		}
		out.setAdmin(adm)
		out.ProviderStatements = statements
		// Logged in the same transaction, as a dispute event is: the row
		// store alone could forget it (a restore, an edit) and the
		// Provider serve the grant again. An admin's changes the admin's
		// record whenever it changes anything (AdminRevokedAt is never
		// before RevokedAt).
		// The same revocation recorded again, after the row store lost
		// it (a restore), is logged already: the integrator would refuse
		// a second leaf of its ref as one queued outside the ledger.
		ref := RevocationRef(grant, at, changed)
		var newStatement *ProviderStatement // logged with it
		if stateChanged {
			newStatement, ref = stated, StatedRevocationRef(grant, at, changed, stated.Brand, stated.Statement)
		}
		switch done, err := l.leafOf(tx, ref); {
		case err != nil:
			return err
		case !done:
			logged = true
			if err := l.queueLeaf(tx, ref, revocationLeaf(grant, at.UTC(), changed, note, by, now, newStatement)); err != nil {
				return err
			}
		}
		return tx.PutRevocation(grant, out)
	})
	if err != nil {
		return Revocation{}, fmt.Errorf("revoke grant %s: %w", grant, err)
	}
	if logged {
		l.wakeLog()
	}
	l.cfg.Logger.InfoContext(ctx, "grant revocation reported", "grant", grant, "reported_by", by, "admin", admin, "revoked_at", out.RevokedAt, "first_reported_by", out.By, "admin_revoked_at", out.AdminRevokedAt, "admin_by", out.AdminBy, "provider_statements", len(out.ProviderStatements))
	return out, nil
}

// leafOf reports whether the log holds a leaf of ref, logged or queued
// (false without a log).
func (l *Ledger) leafOf(tx Tx, ref string) (bool, error) {
	if l.log == nil {
		return false, nil
	}
	switch _, err := tx.LeafIndex(ref); {
	case err == nil:
		return true, nil
	case !errors.Is(err, ErrNotFound):
		return false, err
	}
	return tx.LeafQueued(ref)
}

// Revocation returns the revocation the ledger holds for grant now, nil
// when it holds none. It may be later than the rows of the grant: their
// grant_not_revoked checks are as of their writes.
func (l *Ledger) Revocation(ctx context.Context, grant string) (*Revocation, error) {
	if err := checkField("grantId", grant, MaxFieldLength); err != nil {
		return nil, err
	}
	var out *Revocation
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = tx.Revocation(grant)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("revocation of grant %s: %w", grant, err)
	}
	return out, nil
}

// IssuedAfterRevocation reports whether a receipt issued at ts (its
// signed ts, in whole seconds) is after a revocation at revokedAt: one in
// the revocation's own second may have been served after it, and is not
// taken as before.
func IssuedAfterRevocation(ts, revokedAt time.Time) bool {
	return !ts.Before(revokedAt.Truncate(time.Second))
}

// grantCheck is the grant_not_revoked check of a receipt issued at ts.
func grantCheck(tx Tx, grant string, ts time.Time) (verifier.Check, error) {
	const name = verifier.CheckGrantNotRevoked
	if grant == "" {
		return verifier.Check{Name: name, Result: verifier.Skipped, Detail: "the receipt names no grant"}, nil
	}
	rev, err := tx.Revocation(grant)
	if err != nil {
		return verifier.Check{}, err
	}
	if rev == nil {
		return verifier.Check{Name: name, Result: verifier.Pass, Detail: "no revocation recorded"}, nil
	}
	if IssuedAfterRevocation(ts, rev.RevokedAt) {
		return verifier.Check{Name: name, Result: verifier.Fail, Detail: fmt.Sprintf("grant revoked at %s (reported by %s); the receipt was issued at %s", rev.RevokedAt.Format(time.RFC3339), rev.By, ts.Format(time.RFC3339))}, nil
	}
	return verifier.Check{Name: name, Result: verifier.Pass, Detail: fmt.Sprintf("issued before the revocation at %s", rev.RevokedAt.Format(time.RFC3339))}, nil
}

// GrantView is what the ledger knows of one grant. Its lists hold what
// the grant's rows' signatures vouch for: the principals, agents and
// scopes used of rows whose receipt signature passed, the scopes granted
// by delegation tokens that passed and are bound to the row's receipt
// (the bindings check passed: the token's grant_id is the grant's), and
// the Brand user, scopes and (bound to a request JWT that verified)
// agent of the delegation tokens that tie refusals to the grant
// (Row.TokenVouches);
// Rows and RowCount count every row, refusals under the grant included.
type GrantView struct {
	GrantID       string
	Principals    []string
	Agents        []string
	ScopesGranted []string
	ScopesUsed    []string
	// ListsCut is true when a value may have been left out of Principals,
	// Agents, ScopesGranted or ScopesUsed: each holds at most
	// MaxGrantListBytes, and with RowCountCut the rows not read may vouch
	// for more.
	ListsCut   bool
	Revocation *Revocation
	Rows       []*Row // newest first, at most 1000
	// RowCount counts the rows read: every row of the grant, or, when
	// RowCountCut, the newest MaxGrantRows.
	RowCount int
	// RowCountCut is true when the grant has rows past the MaxGrantRows
	// read: RowCount is a lower bound. The lists then also hold what the
	// grant's newest MaxGrantRows receipts whose signature passed vouch
	// for, read from the stores' index of them (Query.Signed), so that
	// rows no signature vouches for, which any writer may post naming the
	// grant and dated later, do not push them out; what refusals' tokens
	// vouch for is read from the rows read. ListsCut is set: older rows
	// may vouch for more.
	RowCountCut bool
}

// MaxGrantRows is the most rows Grant reads: any writer may post rows
// naming any grant, so a grant's rows are not bounded by anything else,
// and one answer must not read them all. ListRows with the grant id
// lists the rest, a page at a time.
const MaxGrantRows = 10_000

// maxGrantRows is MaxGrantRows, a var only for tests (SetMaxGrantRows).
var maxGrantRows = MaxGrantRows

// MaxGrantListBytes bounds each of a GrantView's lists of distinct values,
// counting each value's length and maxValueOverhead: a grant's rows are
// written by writer keys, and a writer may post receipts naming any grant,
// so the distinct scopes they list are not bounded by anything else.
const MaxGrantListBytes = 128 << 10

// maxValueOverhead is what a value costs in an answer besides its bytes
// (a field tag and length, or quotes and a comma).
const maxValueOverhead = 3

// distinct collects the distinct non-empty values it is given, in the
// order first seen, up to MaxGrantListBytes.
type distinct struct {
	seen  map[string]struct{}
	list  []string
	bytes int
	cut   bool
}

func (d *distinct) add(vals ...string) {
	for _, s := range vals {
		if s == "" {
			continue
		}
		if _, ok := d.seen[s]; ok {
			continue
		}
		if d.bytes+len(s)+maxValueOverhead > MaxGrantListBytes {
			d.cut = true
			continue
		}
		if d.seen == nil {
			d.seen = map[string]struct{}{}
		}
		d.seen[s] = struct{}{}
		d.bytes += len(s) + maxValueOverhead
		d.list = append(d.list, s)
	}
}

// grantLists collects a GrantView's lists from the rows of a grant.
type grantLists struct {
	principals, agents, granted, used distinct
}

// add adds what r's signatures vouch for to the lists.
func (g *grantLists) add(r *Row) {
	// Claims count once a signature vouches for them: any writer's post
	// may name the grant.
	if r.ReceiptVerified() {
		g.principals.add(r.Principal)
		g.agents.add(r.Agent.Platform)
		g.used.add(r.ScopesUsed...)
	}
	// A token vouches for its own grant: one whose grant_id is not the
	// receipt's (bindings failed) may be another grant's, posted with a
	// receipt naming this one.
	if r.Verifier.passed(verifier.CheckDelegationToken) && r.Verifier.passed(verifier.CheckBindings) {
		g.granted.add(r.ScopeGranted...)
	}
	// A refusal's token names the grant the row is under: its Brand user
	// and scopes, and the agent it was made to when that agent's own
	// signature is on the refused request (request_signature and bindings
	// passed).
	if r.TokenVouches() {
		g.principals.add(r.Principal)
		g.granted.add(r.ScopeGranted...)
		if r.Verifier.passed(verifier.CheckRequestSignature) && r.Verifier.passed(verifier.CheckBindings) {
			g.agents.add(r.Agent.Platform)
		}
	}
}

func (g *grantLists) cut() bool {
	return g.principals.cut || g.agents.cut || g.granted.cut || g.used.cut
}

// walkGrant calls fn with the rows q lists, newest first, page after
// page, until it has read limit index entries (each row listed is one at
// least): more is true when it stopped there with entries left. It stops
// when ctx is done.
func walkGrant(ctx context.Context, tx Tx, q Query, limit int, fn func(*Row)) (more bool, err error) {
	read, rows := 0, 0
	q.Read = &read
	for {
		q.MaxRead = limit - max(read, rows)
		page, next, err := tx.List(q)
		if err != nil {
			return false, err
		}
		for _, r := range page {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			fn(r)
		}
		rows += len(page)
		if next == "" {
			return false, nil
		}
		if max(read, rows) >= limit {
			return true, nil
		}
		q.PageToken = next
	}
}

// Grant returns a grant's rows, scopes and revocation, from the grant
// index. It walks the grant's rows, newest first, MaxGrantRows of them at
// most (RowCountCut says it stopped there); when it stopped there and read
// rows no signature vouches for, it also walks the grant's newest
// MaxGrantRows receipts whose signature passed, for the lists. It stops
// when ctx is done.
func (l *Ledger) Grant(ctx context.Context, grant string) (*GrantView, error) {
	if grant == "" {
		return nil, invalid("grantId is required")
	}
	if err := checkField("grantId", grant, MaxFieldLength); err != nil {
		return nil, err
	}
	v := &GrantView{GrantID: grant}
	var lists grantLists
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if v.Revocation, err = tx.Revocation(grant); err != nil {
			return err
		}
		unsigned := 0
		v.RowCountCut, err = walkGrant(ctx, tx, Query{GrantID: grant, PageSize: 1000}, maxGrantRows, func(r *Row) {
			v.RowCount++
			if len(v.Rows) < 1000 {
				v.Rows = append(v.Rows, r)
			}
			if !r.ReceiptVerified() {
				unsigned++
			}
			lists.add(r)
		})
		if err != nil || !v.RowCountCut || unsigned == 0 {
			return err
		}
		// The rows read are not all the grant's, and some of them no
		// signature vouches for: any writer may post such rows naming
		// the grant, dated after its receipts, so that they fill the
		// rows read. The receipts a signature vouches for are read from
		// the index that holds them alone, which such rows do not enter.
		_, err = walkGrant(ctx, tx, Query{GrantID: grant, Signed: true, PageSize: 1000}, maxGrantRows, lists.add)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", grant, err)
	}
	if v.RowCount == 0 && v.Revocation == nil {
		return nil, fmt.Errorf("grant %s: %w", grant, ErrNotFound)
	}
	v.Principals, v.Agents, v.ScopesGranted, v.ScopesUsed = lists.principals.list, lists.agents.list, lists.granted.list, lists.used.list
	// With RowCountCut, rows not read may vouch for more: refusals tied
	// to the grant by its token, and receipts past the signed ones read.
	v.ListsCut = lists.cut() || v.RowCountCut
	return v, nil
}

// GrantRevocation is a grant's revocation, as ListRevocations lists it.
type GrantRevocation struct {
	GrantID    string
	Revocation Revocation
}

// MaxRevocationsRead is the most revocations one page of ListRevocations
// reads: with since, few of them may be listed.
const MaxRevocationsRead = 10_000

// maxRevocationsRead is MaxRevocationsRead, a var only for tests.
var maxRevocationsRead = MaxRevocationsRead

// revocationsChunk is how many revocations ListRevocations reads at once
// with since, when few are listed.
const revocationsChunk = 256

// ListRevocations lists the revocations the ledger holds, a grant each,
// in grant id order, pageSize of them at most (0: 100), from after the
// grant pageToken names: every one, or with since those recorded or in
// force from since on (Revocation.Since). It reads MaxRevocationsRead of
// them at most; next, when not "", continues after the last one read,
// listed or not.
func (l *Ledger) ListRevocations(ctx context.Context, since time.Time, pageSize int, pageToken string) ([]GrantRevocation, string, error) {
	switch {
	case pageSize < 0 || pageSize > 1000:
		return nil, "", invalid("pageSize must be between 1 and 1000")
	case pageSize == 0:
		pageSize = 100
	}
	after := ""
	if pageToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || len(b) == 0 || len(b) > MaxFieldLength {
			return nil, "", invalid("pageToken is not one this ledger gave")
		}
		after = string(b)
	}
	var out []GrantRevocation
	var next string
	err := l.store.View(ctx, func(tx Tx) error {
		rl, ok := tx.(RevocationLister)
		if !ok {
			return fmt.Errorf("%w: this row store cannot list its revocations", ErrInvalid)
		}
		out, next = out[:0], ""
		// Read a chunk at a time, one more than the page still needs,
		// until the page is full and one more matched (another page
		// follows), the store ends, or maxRevocationsRead were read.
		from, read, more := after, 0, false
		for !more && read < maxRevocationsRead {
			limit := min(pageSize-len(out)+1, maxRevocationsRead-read)
			if !since.IsZero() {
				limit = min(max(limit, revocationsChunk), maxRevocationsRead-read)
			}
			n := 0
			err := rl.RevocationsAfter(from, limit, func(grant string, r *Revocation) error {
				n++
				if more {
					return nil // past the page: not read on
				}
				read, from = read+1, grant
				switch {
				case !since.IsZero() && !r.Since(since):
				case len(out) == pageSize:
					more = true
				default:
					out = append(out, GrantRevocation{GrantID: grant, Revocation: *r})
				}
				return ctx.Err()
			})
			if err != nil {
				return err
			}
			if n < limit {
				break // the end of the store
			}
		}
		switch {
		case more:
			next = RevocationsAfter(out[len(out)-1].GrantID)
		case read == maxRevocationsRead:
			// The read stopped short of the end: on from there.
			next = RevocationsAfter(from)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list revocations: %w", err)
	}
	return out, next, nil
}

// RevocationsAfter is the page token of ListRevocations that goes on
// after grant: an answer cut short of its page ends with it.
func RevocationsAfter(grant string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(grant))
}

// Since reports whether r was recorded, or is in force, from t on: its
// RevokedAt, RecordedAt, AdminRecordedAt, or a Provider statement's
// RevokedAt or RecordedAt is at or after t.
func (r *Revocation) Since(t time.Time) bool {
	for _, at := range []time.Time{r.RevokedAt, r.RecordedAt, r.AdminRecordedAt} {
		if !at.IsZero() && !at.Before(t) {
			return true
		}
	}
	for _, st := range r.ProviderStatements {
		if !st.RevokedAt.Before(t) || !st.RecordedAt.IsZero() && !st.RecordedAt.Before(t) {
			return true
		}
	}
	return false
}
