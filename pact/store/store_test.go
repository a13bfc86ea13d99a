package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/records"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// acme is the demo shop brand.
func acme(t *testing.T) *brand.Brand {
	t.Helper()
	brands, err := brand.Load(filepath.Join("..", "brands"))
	if err != nil || brands["acme"] == nil {
		t.Fatalf("demo brands: %v", err)
	}
	return brands["acme"]
}

// A turn's reply, state, record changes, action log and outbox entries
// are kept together or not at all.
func TestRecordTurnKeepsATurnWholeOrNotAtAll(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	b := acme(t)
	conv := Conversation{ID: "c1", Brand: b.ID, PA: "https://pa.example", Sub: "u1", Created: now}
	if _, stored, err := s.BeginTurn(conv, true, "m1", now); err != nil || stored != nil {
		t.Fatalf("begin: %v %s", err, stored)
	}
	if _, _, err := s.BeginTurn(conv, false, "m1", now.Add(time.Second)); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("a retry while the turn runs: %v, want ErrTurnRunning", err)
	}
	book := records.NewBook(b.ID, s)
	rt := b.RecordType("order")
	rec, err := book.Get(context.Background(), rt, "A-5531")
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if err := book.Set(context.Background(), rt, rec, map[string]string{"status": "cancelled"}); err != nil {
		t.Fatal(err)
	}
	turn := TurnRecord{ContextID: "c1", MessageID: "m1", Reply: json.RawMessage(`{"message":{}}`), State: json.RawMessage(`{"record":"A-5531"}`),
		Changes: book.Changes(), ReceiptSHA256: "ab", ActionLog: []ActionLogEntry{{ReceiptSHA256: "ab", Tool: "cancel_order", At: now}},
		Outbox: []pipeline.Item{{Receipt: &pipeline.Receipt{ReceiptJWS: "a.b.c"}}}}

	// The conversation is gone by commit time: nothing of the turn is kept.
	var saved []byte
	err = s.db.Update(func(tx *bolt.Tx) error {
		saved = append([]byte(nil), tx.Bucket(bContexts).Get([]byte("c1"))...)
		return tx.Bucket(bContexts).Delete([]byte("c1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordTurn(turn, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record turn without its conversation: %v", err)
	}
	if st, _ := s.Stats(); st.Outbox != 0 || st.ActionLogs != 0 {
		t.Fatalf("a failed turn left %+v", st)
	}
	if f, _ := s.Fields(records.Key{Brand: b.ID, Type: "order", ID: "A-5531"}); f != nil {
		t.Fatalf("a failed turn changed the record: %v", f)
	}
	select {
	case <-s.Queued():
		t.Fatal("a failed turn woke the pipeline")
	default:
	}

	// With its conversation back, the same turn is kept whole.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bContexts).Put([]byte("c1"), saved) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordTurn(turn, now); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(); st.Outbox != 1 || st.ActionLogs != 1 {
		t.Fatalf("after the turn: %+v", st)
	}
	select {
	case <-s.Queued():
	default:
		t.Fatal("queuing a receipt did not wake the pipeline")
	}
	if _, stored, err := s.BeginTurn(conv, false, "m1", now.Add(time.Minute)); err != nil || string(stored) != `{"message":{}}` {
		t.Fatalf("a retry after the turn: %v %s, want the stored reply", err, stored)
	}
	c, err := s.Conversation("c1")
	if err != nil || string(c.State) != `{"record":"A-5531"}` {
		t.Fatalf("conversation %+v %v", c, err)
	}
	if log, err := s.ActionLog("ab"); err != nil || len(log) != 1 || log[0].Tool != "cancel_order" {
		t.Fatalf("action log %+v %v", log, err)
	}
}

// Two turns that both cancel one order: the commit of the second sees the
// first's change and fails, rather than cancelling twice.
func TestRecordChangeCommitsOnlyOverWhatTheTurnSaw(t *testing.T) {
	s := openStore(t)
	b := acme(t)
	rt := b.RecordType("order")
	ctx := context.Background()
	first, second := records.NewBook(b.ID, s), records.NewBook(b.ID, s)
	for _, book := range []*records.Book{first, second} {
		rec, err := book.Get(ctx, rt, "a-5531")
		if err != nil || rec["status"] != "processing" || rec.ID() != "A-5531" {
			t.Fatalf("record %v %v", rec, err)
		}
		if err := book.Set(ctx, rt, rec, map[string]string{"status": "cancelled"}); err != nil {
			t.Fatal(err)
		}
		if rec, _ := book.Get(ctx, rt, "A-5531"); rec["status"] != "cancelled" {
			t.Fatalf("the turn does not see its own change: %v", rec)
		}
	}
	commit := func(id string, book *records.Book) error {
		now := time.Now()
		conv := Conversation{ID: id, Brand: b.ID}
		if _, _, err := s.BeginTurn(conv, true, "m1", now); err != nil {
			return err
		}
		_, err := s.RecordTurn(TurnRecord{ContextID: id, MessageID: "m1", Reply: json.RawMessage(`{}`), Changes: book.Changes()}, now)
		return err
	}
	if err := commit("c1", first); err != nil {
		t.Fatal(err)
	}
	if err := commit("c2", second); !errors.Is(err, records.ErrChanged) {
		t.Fatalf("second commit: %v, want records.ErrChanged", err)
	}
	if rec, _ := records.NewBook(b.ID, s).Get(ctx, rt, "A-5531"); rec["status"] != "cancelled" || rec["total"] != "42.50" {
		t.Fatalf("stored record %v", rec)
	}
}

// A status kept before brands defined record types (order_status, by
// brand/id) still counts, and a change commits over it.
func TestLegacyOrderStatusIsRead(t *testing.T) {
	s := openStore(t)
	b := acme(t)
	rt := b.RecordType("order")
	ctx := context.Background()
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bOrders).Put([]byte(b.ID+"/A-5531"), []byte("on hold")) }); err != nil {
		t.Fatal(err)
	}
	book := records.NewBook(b.ID, s)
	rec, err := book.Get(ctx, rt, "A-5531")
	if err != nil || rec["status"] != "on hold" {
		t.Fatalf("record %v %v", rec, err)
	}
	if err := book.Set(ctx, rt, rec, map[string]string{"status": "processing"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, _, err := s.BeginTurn(Conversation{ID: "c1", Brand: b.ID}, true, "m1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordTurn(TurnRecord{ContextID: "c1", MessageID: "m1", Reply: json.RawMessage(`{}`), Changes: book.Changes()}, now); err != nil {
		t.Fatal(err)
	}
	if rec, _ := records.NewBook(b.ID, s).Get(ctx, rt, "A-5531"); rec["status"] != "processing" {
		t.Fatalf("stored record %v", rec)
	}
}

// The device flow through the store: a decision by user code, redemption
// once, and the answers of the other states, with the poll's bookkeeping
// kept even when the answer is an error.
func TestDeviceCodeRedemption(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", []string{"orders:read", "orders:cancel"}, 5*time.Second, now)
	userCode, err := s.NewDeviceAuthorization("dc_1", d, now)
	if err != nil {
		t.Fatal(err)
	}
	code := func(err error) string {
		var oe *oauth.Error
		if errors.As(err, &oe) {
			return oe.Code
		}
		return ""
	}
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://other.example", "u1", nil, now, anyRefreshToken); code(err) != oauth.InvalidGrant {
		t.Fatalf("another client: %v", err)
	}
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u2", nil, now, anyRefreshToken); code(err) != oauth.InvalidGrant {
		t.Fatalf("another user of the agent: %v", err)
	}
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now, anyRefreshToken); code(err) != oauth.AuthorizationPending {
		t.Fatalf("pending: %v", err)
	}
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now.Add(time.Second), anyRefreshToken); code(err) != oauth.SlowDown {
		t.Fatalf("polling too fast: %v", err)
	}
	// slow_down was kept: the interval is now 10 s.
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now.Add(8*time.Second), anyRefreshToken); code(err) != oauth.SlowDown {
		t.Fatalf("within the longer interval: %v", err)
	}
	if _, err := s.DecideDevice(userCode, oauth.Decision{User: "acct-48213", Approve: true, Scopes: []string{"refunds:issue"}}, now); !errors.Is(err, oauth.ErrNotRequested) {
		t.Fatalf("approving an unrequested scope: %v", err)
	}
	if _, err := s.DecideDevice("bcdf-ghjk", oauth.Decision{User: "acct-48213"}, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown user code: %v", err)
	}
	if _, err := s.DecideDevice(userCode, oauth.Decision{User: "acct-48213", Approve: true, Scopes: []string{"orders:read"}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideDevice(userCode, oauth.Decision{User: "acct-48213"}, now); !errors.Is(err, oauth.ErrTransition) {
		t.Fatalf("a second decision: %v", err)
	}
	g, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now.Add(20*time.Second), anyRefreshToken)
	if err != nil || g.User != "acct-48213" || len(g.Scopes) != 1 || g.Scopes[0] != "orders:read" {
		t.Fatalf("redeem: %+v %v", g, err)
	}
	if _, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now.Add(30*time.Second), anyRefreshToken); code(err) != oauth.InvalidGrant {
		t.Fatalf("a second redemption: %v", err)
	}
	if got, err := s.Grant(g.ID); err != nil || got.ID != g.ID {
		t.Fatalf("stored grant %+v %v", got, err)
	}
	if st, _ := s.Stats(); st.Outbox != 0 {
		t.Fatalf("an approval queued %d entries", st.Outbox)
	}
}

// A refresh token works once; presented again (past oauth.RefreshGrace) it revokes the grant, and
// the grant a step-up made carrying its scopes, each revocation queued for
// the ledger in the same transaction.
func TestRefreshTokenReuseRevokesTheGrant(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	g := oauth.Grant{ID: "a2agrant_1", Brand: "acme", Client: "https://pa.example", User: "acct-48213", Scopes: []string{"orders:read"}, Created: now, Expires: now.Add(oauth.GrantTTL)}
	ext := oauth.Grant{ID: "a2agrant_2", Brand: "acme", Client: "https://pa.example", User: "acct-48213", Scopes: []string{"orders:cancel"}, Created: now, Expires: now.Add(oauth.GrantTTL)}
	ext.Carry(&g)
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := put(tx, bGrants, []byte(g.ID), g); err != nil {
			return err
		}
		return put(tx, bGrants, []byte(ext.ID), ext)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.IssueRefreshToken("rt_1", g, now); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", now, successor("rt_2")); err != nil || got.ID != g.ID {
		t.Fatalf("first use: %+v %v", got, err)
	}
	var oe *oauth.Error
	late := now.Add(oauth.RefreshGrace + time.Second)
	if _, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", late, successor("rt_3")); !errors.As(err, &oe) || oe.Code != oauth.InvalidGrant {
		t.Fatalf("reuse: %v", err)
	}
	if got, _ := s.Grant(g.ID); got.Revoked.IsZero() {
		t.Fatal("the reuse did not revoke the grant")
	}
	if got, _ := s.Grant(ext.ID); got.Revoked.IsZero() {
		t.Fatal("the reuse did not revoke the step-up's grant that carries the grant's scopes")
	}
	items, err := s.Outbox(10)
	if err != nil || len(items) != 2 || items[0].Revocation == nil || items[0].Revocation.GrantID != g.ID || items[1].Revocation == nil || items[1].Revocation.GrantID != ext.ID {
		t.Fatalf("outbox %+v %v", items, err)
	}
}

// A revocation whose time was read before a turn under the grant committed
// is dated no earlier than that turn: the turn's receipt was served before
// the revocation took effect, and the ledger must not read it as an action
// after the revocation.
func TestARevocationIsNotDatedBeforeATurnThatCommittedFirst(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	g := oauth.Grant{ID: "a2agrant_1", Brand: "acme", Client: "https://pa.example", User: "acct-48213", Scopes: []string{"orders:read"}, Created: now, Expires: now.Add(oauth.GrantTTL)}
	if err := s.db.Update(func(tx *bolt.Tx) error { return put(tx, bGrants, []byte(g.ID), g) }); err != nil {
		t.Fatal(err)
	}
	// The revocation read its clock at now; a turn that started a second
	// later committed before it.
	turnAt := now.Add(time.Second)
	conv := Conversation{ID: "c1", Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
	if _, _, err := s.BeginTurn(conv, true, "m1", turnAt); err != nil {
		t.Fatal(err)
	}
	turn := TurnRecord{ContextID: "c1", MessageID: "m1", Reply: json.RawMessage(`{"message":{}}`), State: json.RawMessage(`{}`), User: "acct-48213", Grant: g.ID,
		Outbox: []pipeline.Item{{Receipt: &pipeline.Receipt{ReceiptJWS: "a.b.c"}}}}
	if _, err := s.RecordTurn(turn, turnAt); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeGrant("acme", "acct-48213", g.ID, "the user revoked it", now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Grant(g.ID)
	if err != nil || got.Revoked.Before(turnAt) {
		t.Fatalf("revoked at %s, before the turn at %s that committed first (%v)", got.Revoked, turnAt, err)
	}
	items, err := s.Outbox(10)
	if err != nil || len(items) != 2 || items[1].Revocation == nil || items[1].Revocation.RevokedAt.Before(turnAt) {
		t.Fatalf("the revocation queued for the ledger: %+v %v", items, err)
	}
}

// The outbox holds at most LimitOutbox's bytes of receipts and refusals:
// a turn that would queue more is kept nothing of (ErrOutboxFull), while
// revocations are queued whatever it holds; what the ledger takes makes
// room again. Its size is kept across a reopen.
func TestTheOutboxIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	receipt := pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: strings.Repeat("r", 400)}}
	one, _ := json.Marshal(receipt)
	s.LimitOutbox(int64(2*len(one) + len(one)/2))
	turn := func(i int) error {
		conv := Conversation{ID: fmt.Sprint("c", i), Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
		if _, _, err := s.BeginTurn(conv, true, "m1", now); err != nil {
			t.Fatal(err)
		}
		_, err := s.RecordTurn(TurnRecord{ContextID: conv.ID, MessageID: "m1", Reply: json.RawMessage(`{}`), State: json.RawMessage(`{}`), Outbox: []pipeline.Item{receipt}}, now)
		return err
	}
	for i := range 2 {
		if err := turn(i); err != nil {
			t.Fatalf("turn %d within the bound: %v", i, err)
		}
	}
	if err := turn(2); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("a turn past the bound: %v, want ErrOutboxFull", err)
	}
	if d, b := s.Depth(), s.OutboxBytes(); d != 2 || b != int64(2*len(one)) {
		t.Fatalf("after a refused turn: %d entries, %d bytes", d, b)
	}
	if err := s.Enqueue(pipeline.Revoked("a2agrant_1", now, "the user revoked it")); err != nil {
		t.Fatalf("a revocation past the bound: %v", err)
	}
	entries, err := s.Head(1)
	if err != nil || len(entries) != 1 {
		t.Fatal(entries, err)
	}
	if err := s.Remove(entries[0].Seq); err != nil {
		t.Fatal(err)
	}
	if err := turn(3); err != nil {
		t.Fatalf("a turn once the ledger took one: %v", err)
	}
	want := s.OutboxBytes()
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.OutboxBytes(); got != want || s.Depth() != 3 {
		t.Fatalf("reopened: %d bytes in %d entries, want %d bytes", got, s.Depth(), want)
	}
}

// The token endpoint reads the grants a redemption rests on before it
// spends the code (DeviceCodeGrants), to apply the ledger's revocations
// to them. A User who approves between that read, which found the code
// pending and no grant, and the redemption must not have the new grant
// carry an older grant nobody checked: the redemption answers
// authorization_pending, spends nothing, and the next poll, which reads
// the grants again, redeems the code.
func TestARedemptionRestsOnlyOnGrantsTheCallerChecked(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	redeem := func(dc string, scopes []string, at time.Time) oauth.Grant {
		t.Helper()
		d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", scopes, 5*time.Second, at)
		userCode, err := s.NewDeviceAuthorization(dc, d, at)
		if err != nil {
			t.Fatal(err)
		}
		held, err := s.DeviceCodeGrants(dc, "acme", "https://pa.example", "u1", at)
		if err != nil || len(held) != 0 {
			t.Fatalf("the grants of a pending code: %v %v", held, err)
		}
		if _, err := s.DecideDevice(userCode, oauth.Decision{User: "acct-48213", Approve: true, Scopes: scopes}, at); err != nil {
			t.Fatal(err)
		}
		g, err := s.RedeemDeviceCode(dc, "acme", "https://pa.example", "u1", nil, at, anyRefreshToken)
		var oe *oauth.Error
		switch {
		case err == nil && dc == "dc_1":
			return g
		case !errors.As(err, &oe) || oe.Code != oauth.AuthorizationPending:
			t.Fatalf("redeeming %s on grants read while it was pending: %+v %v; want authorization_pending", dc, g, err)
		}
		if held, err = s.DeviceCodeGrants(dc, "acme", "https://pa.example", "u1", at.Add(6*time.Second)); err != nil || len(held) != 1 {
			t.Fatalf("the grants of %s once approved: %v %v", dc, held, err)
		}
		g, err = s.RedeemDeviceCode(dc, "acme", "https://pa.example", "u1", []string{held[0].ID}, at.Add(6*time.Second), anyRefreshToken)
		if err != nil {
			t.Fatalf("the next poll: %v", err)
		}
		return g
	}
	first := redeem("dc_1", []string{"orders:cancel"}, now)
	second := redeem("dc_2", []string{"orders:read"}, now.Add(time.Minute))
	if !slices.Contains(second.Scopes, "orders:cancel") || first.ID == second.ID {
		t.Errorf("the second grant %+v does not carry the first's orders:cancel, once checked", second)
	}
}

// successor is an Issue that makes the refresh token rt.
func successor(rt string) Issue { return func(oauth.Grant) (string, error) { return rt, nil } }

// A refresh token is spent only with its successor stored: when the
// tokens cannot be issued (the delegation token not signed), nothing is
// spent, stored or revoked, and the agent's retry is answered as the
// first request would have been.
func TestARefreshTokenIsSpentOnlyWithItsSuccessor(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	g := grantOf(t, s, "a2agrant_1", now)
	if err := s.IssueRefreshToken("rt_1", g, now); err != nil {
		t.Fatal(err)
	}
	unsigned := errors.New("the signing key is unreadable")
	failing := func(oauth.Grant) (string, error) { return "rt_lost", unsigned }
	if _, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", now, failing); !errors.Is(err, unsigned) {
		t.Fatalf("a refresh whose tokens were not issued: %v, want its error", err)
	}
	if _, found, _ := s.RefreshTokenGrant("rt_lost", "acme", "https://pa.example", "u1"); found {
		t.Fatal("the successor of a failed refresh was stored")
	}
	if got, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", now.Add(time.Second), successor("rt_2")); err != nil || got.ID != g.ID {
		t.Fatalf("the retry: %+v %v, want the grant", got, err)
	}
	if got, _ := s.Grant(g.ID); !got.Revoked.IsZero() {
		t.Fatal("the retry after a failed refresh revoked the grant")
	}
	if st, _ := s.Stats(); st.Outbox != 0 {
		t.Fatalf("%d entries queued for the ledger, want none", st.Outbox)
	}
}

// A refresh token spent moments ago, presented again by its holder (the
// same personal agent for the same sub) while its successor is unspent, is
// answered with a new successor, and the one its first answer carried
// (lost on its way) is retired. Anything else that presents a spent token
// revokes the grant, as a leak: later than oauth.RefreshGrace, once its
// successor was spent, or the retired successor itself; another sub of
// the agent is refused and changes nothing.
func TestARefreshRetriedWithinTheGraceIsAnsweredAgain(t *testing.T) {
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	type step struct {
		token, sub string
		after      time.Duration
	}
	for _, tc := range []struct {
		name       string
		before     []step // each answered with a new successor: the step's token + "_next"
		present    step
		wantAnswer bool
		wantRevoke bool
	}{
		{name: "its holder at once", present: step{"rt_1", "u1", 0}, wantAnswer: true},
		{name: "its holder at the end of the grace", present: step{"rt_1", "u1", oauth.RefreshGrace}, wantAnswer: true},
		{name: "its holder twice", before: []step{{"rt_1", "u1", time.Second}}, present: step{"rt_1", "u1", 2 * time.Second}, wantAnswer: true},
		{name: "its holder past the grace", present: step{"rt_1", "u1", oauth.RefreshGrace + time.Second}, wantRevoke: true},
		{name: "its holder again past the grace of its spending", before: []step{{"rt_1", "u1", oauth.RefreshGrace - time.Second}}, present: step{"rt_1", "u1", oauth.RefreshGrace + time.Second}, wantRevoke: true},
		{name: "once its successor was spent", before: []step{{"rt_2", "u1", time.Second}}, present: step{"rt_1", "u1", 2 * time.Second}, wantRevoke: true},
		{name: "the retired successor", before: []step{{"rt_1", "u1", time.Second}}, present: step{"rt_2", "u1", 2 * time.Second}, wantRevoke: true},
		{name: "another user of the agent", present: step{"rt_1", "u2", 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			g := grantOf(t, s, "a2agrant_1", t0)
			g.AgentSub = "u1"
			if err := s.update(func(tx *txn) error { return putGrant(tx.Tx, &g) }); err != nil {
				t.Fatal(err)
			}
			if err := s.IssueRefreshToken("rt_1", g, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", t0, successor("rt_2")); err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.before {
				if _, err := s.RotateRefreshToken(b.token, "acme", "https://pa.example", b.sub, t0.Add(b.after), successor(b.token+"_next")); err != nil {
					t.Fatalf("%s: %v", b.token, err)
				}
			}
			got, err := s.RotateRefreshToken(tc.present.token, "acme", "https://pa.example", tc.present.sub, t0.Add(tc.present.after), successor("rt_new"))
			if tc.wantAnswer != (err == nil) || (err == nil && got.ID != g.ID) {
				t.Fatalf("presented: %+v %v, want answered %v", got, err, tc.wantAnswer)
			}
			if oe, ok := errors.AsType[*oauth.Error](err); err != nil && (!ok || oe.Code != oauth.InvalidGrant) {
				t.Fatalf("refused with %v, want invalid_grant", err)
			}
			cur, _ := s.Grant(g.ID)
			st, _ := s.Stats()
			if revoked := !cur.Revoked.IsZero(); revoked != tc.wantRevoke || (st.Outbox == 1) != tc.wantRevoke {
				t.Fatalf("grant revoked %v, %d entries for the ledger; want revoked %v", revoked, st.Outbox, tc.wantRevoke)
			}
			if !tc.wantAnswer {
				return
			}
			// The new successor is the one live token of the chain.
			if _, err := s.RotateRefreshToken("rt_new", "acme", "https://pa.example", "u1", t0.Add(tc.present.after+time.Second), successor("rt_after")); err != nil {
				t.Fatalf("the new successor: %v", err)
			}
			if _, err := s.RotateRefreshToken("rt_2", "acme", "https://pa.example", "u1", t0.Add(tc.present.after+2*time.Second), successor("rt_x")); err == nil {
				t.Fatal("the retired successor was answered")
			}
			if cur, _ := s.Grant(g.ID); cur.Revoked.IsZero() {
				t.Fatal("the retired successor, presented, did not revoke the grant")
			}
		})
	}
}

// anyRefreshToken is an Issue that makes a fresh refresh token.
func anyRefreshToken(oauth.Grant) (string, error) { return oauth.NewSecret("rt_"), nil }

// A device code is redeemed only with the refresh token of its grant
// stored: when the tokens cannot be issued, the code stays approved, no
// grant is made and the agent's older grant is neither replaced nor
// revoked, nothing is queued for the ledger, and the agent's retry
// redeems the code.
func TestADeviceCodeIsRedeemedOnlyWithItsTokens(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	approve := func(dc string, at time.Time) {
		t.Helper()
		d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", []string{"orders:read"}, 5*time.Second, at)
		userCode, err := s.NewDeviceAuthorization(dc, d, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.DecideDevice(userCode, oauth.Decision{User: "acct-48213", Approve: true, Scopes: []string{"orders:read"}}, at); err != nil {
			t.Fatal(err)
		}
	}
	approve("dc_old", now)
	older, err := s.RedeemDeviceCode("dc_old", "acme", "https://pa.example", "u1", nil, now, successor("rt_old"))
	if err != nil {
		t.Fatal(err)
	}
	approve("dc_new", now.Add(time.Minute))
	unsigned := errors.New("the signing key is unreadable")
	var issuedFor oauth.Grant
	failing := func(g oauth.Grant) (string, error) { issuedFor = g; return "rt_lost", unsigned }
	at := now.Add(time.Minute + 6*time.Second)
	if _, err := s.RedeemDeviceCode("dc_new", "acme", "https://pa.example", "u1", []string{older.ID}, at, failing); !errors.Is(err, unsigned) {
		t.Fatalf("a redemption whose tokens were not issued: %v, want its error", err)
	}
	if _, err := s.Grant(issuedFor.ID); issuedFor.ID == "" || !errors.Is(err, ErrNotFound) {
		t.Fatalf("the grant of the failed redemption (%q): %v, want none kept", issuedFor.ID, err)
	}
	if g, _ := s.Grant(older.ID); !g.Active(at) {
		t.Fatalf("the older grant after a failed redemption: %+v, want it active", g)
	}
	if _, found, _ := s.RefreshTokenGrant("rt_lost", "acme", "https://pa.example", "u1"); found {
		t.Fatal("the refresh token of a failed redemption was stored")
	}
	if st, _ := s.Stats(); st.Outbox != 0 {
		t.Fatalf("%d entries queued for the ledger, want none", st.Outbox)
	}
	at = at.Add(6 * time.Second)
	g, err := s.RedeemDeviceCode("dc_new", "acme", "https://pa.example", "u1", []string{older.ID}, at, successor("rt_new"))
	if err != nil || g.ID == older.ID {
		t.Fatalf("the retry: %+v %v, want a new grant", g, err)
	}
	if got, found, _ := s.RefreshTokenGrant("rt_new", "acme", "https://pa.example", "u1"); !found || got.ID != g.ID {
		t.Fatalf("the retry's refresh token: %+v %v", got, found)
	}
	if o, _ := s.Grant(older.ID); o.ReplacedBy != g.ID {
		t.Fatalf("the older grant after the retry: %+v, want it replaced by %s", o, g.ID)
	}
}
