package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/customer"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/pact/brand"
)

// airline is ledgerd with its Provider serving the demo airline, a brand
// defined by its file alone (pact/brands/skyways.yaml), and a personal
// agent's client for it.
type airline struct {
	*env
	p     *pact.Provider
	iface string
	flow  *pact.DeviceFlow
	srv   *pact.AuthServer // the flow's authorization server
	pa    *pact.Client
	ana   *customer.Customer
}

func newAirline(t *testing.T) *airline {
	t.Helper()
	dir := t.TempDir()
	file, err := os.ReadFile("../../pact/brands/skyways.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skyways.yaml"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := brand.Load(dir); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "writer.key")
	if err := os.WriteFile(keyFile, []byte(keys["writer"]), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.Provider.BrandsDir = dir
		c.Provider.LedgerKeyFile = keyFile
		c.Provider.DevicePollInterval = config.Duration(time.Second)
		// No retention table in the configuration: ledgerd takes the
		// classes the brand file names for its tools and scopes.
	})
	a := &airline{env: e, p: e.srv.Provider(), ana: customer.New("ana@example.com", "sky-ana-demo")}
	a.pa = &pact.Client{Issuer: e.sc.PA.ID, Token: func(sub string) (string, error) {
		now := time.Now()
		return e.sc.PA.Key.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": sub, "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()}), nil
	}, Providers: []string{"http://" + e.srv.ProviderAddr()}}
	card, err := a.pa.FetchCard(context.Background(), "http://"+e.srv.ProviderAddr()+"/a2a/skyways/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	if a.iface, err = card.Interface(); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if a.flow, ok = card.Delegation(); !ok {
		t.Fatal("the airline's card offers no delegation")
	}
	if a.srv, err = a.pa.CheckFlow(context.Background(), a.flow); err != nil {
		t.Fatal(err)
	}
	return a
}

// authorize asks for scopes and has Ana consent to keep of them on the
// consent page; it returns the token set.
func (a *airline) authorize(t *testing.T, scopes, keep []string) *pact.TokenSet {
	t.Helper()
	ctx := context.Background()
	d, err := a.pa.StartAuthorization(ctx, a.flow, "u1", scopes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ana.Answer(ctx, d.VerificationURIComplete, customer.Decision{Keep: keep}); err != nil {
		t.Fatal(err)
	}
	ts, err := a.pa.WaitForToken(ctx, a.flow, "u1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// say sends text under the token (none: PACT §3 alone) in the context.
func (a *airline) say(t *testing.T, ts *pact.TokenSet, contextID, text string) *pact.SendReply {
	t.Helper()
	tok := ""
	if ts != nil {
		tok = ts.AccessToken
	}
	r, err := a.pa.SendDelegated(context.Background(), a.iface, "u1", contextID, "", text, tok)
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return r
}

// receipt checks that the reply is a message whose receipt verifies
// against the airline's keys and the grant of ts, the token it was sent
// with, and returns its text and context.
func (a *airline) receipt(t *testing.T, ts *pact.TokenSet, r *pact.SendReply) (string, string, *pact.Receipt) {
	t.Helper()
	if r.Message == nil {
		t.Fatalf("want a message, got task %+v", r.Task)
	}
	rc, err := a.pa.VerifyGrantReceipt(context.Background(), a.srv, a.iface, ts, r.Message)
	if err != nil {
		t.Fatal(err)
	}
	return pact.ReplyText(r.Message), r.Message.ContextID, rc
}

// rows waits until the ledger lists n rows for target and returns them.
func (a *airline) rows(t *testing.T, target string, n int) []Row {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		var list struct{ Rows []Row }
		a.call(t, "GET", "/v1/rows?target="+target, "support", nil, &list)
		if len(list.Rows) >= n {
			return list.Rows
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d of %d rows for %s reached the ledger (pipeline depth %d)", len(list.Rows), n, target, a.p.PipelineDepth())
		}
	}
}

// The airline, a business shipped as data only, passes the shop's
// end-to-end delegated test: consent to a subset, a step-up to rebook
// naming only a scope on its card, receipts landing in the ledger with the
// classes its tools name, and the dispute drill 6/6.
func TestAirlineEndToEndAsData(t *testing.T) {
	a := newAirline(t)
	card := []string{"flights:upcoming:read", "flights:rebook", "seats:change"}
	for _, s := range card {
		if a.flow.Scopes[s] == "" {
			t.Fatalf("card scopes %v lack %s", a.flow.Scopes, s)
		}
	}

	// Under PACT §3 alone a rebook gets a step-up task (withoutToken:
	// stepUp) and the ledger a refusal.
	r := a.say(t, nil, "", "Rebook SKY-20931 to SK 214 on 2026-11-03 18:40")
	if r.Task == nil || r.Task.Status.State != "TASK_STATE_AUTH_REQUIRED" || !slices.Equal(r.Task.Metadata.MissingScopes, []string{"flights:rebook"}) {
		t.Fatalf("identity-only rebook: %+v %+v", r.Message, r.Task)
	}

	// Ana allows two of the three scopes asked for.
	ts := a.authorize(t, card, []string{"flights:upcoming:read", "seats:change"})
	if !slices.Equal(ts.Scopes, []string{"flights:upcoming:read", "seats:change"}) {
		t.Fatalf("granted %v", ts.Scopes)
	}
	text, ctxID, rc := a.receipt(t, ts, a.say(t, ts, "", "When does booking SKY-20931 depart?"))
	if text != "Booking SKY-20931: SK 210 from LIS to AMS, departing 2026-11-03 07:05, seat 22A, confirmed." || !slices.Equal(rc.Claims.ScopesUsed, []string{"flights:upcoming:read"}) {
		t.Fatalf("lookup: %q %+v", text, rc.Claims)
	}
	text, _, rc = a.receipt(t, ts, a.say(t, ts, ctxID, "Please move me to seat 14C"))
	if text != "Your seat on booking SKY-20931 (SK 210) is now 14C." || rc.Claims.Actions[0].Tool != "change_seat" {
		t.Fatalf("seat: %q %+v", text, rc.Claims)
	}

	// The rebook needs flights:rebook: a step-up naming only that scope,
	// which is on the card.
	r = a.say(t, ts, ctxID, "Rebook SKY-20931 to SK 214 on 2026-11-03 18:40")
	if r.Task == nil || !slices.Equal(r.Task.Metadata.MissingScopes, []string{"flights:rebook"}) || r.Task.ContextID != ctxID {
		t.Fatalf("step-up: %+v %+v", r.Message, r.Task)
	}
	for _, s := range r.Task.Metadata.MissingScopes {
		if a.flow.Scopes[s] == "" {
			t.Fatalf("the step-up names %s, not on the card", s)
		}
	}
	// As the personal agent does: ask again for what it holds and what is
	// missing; Ana allows it.
	ts = a.authorize(t, append(slices.Clone(ts.Scopes), r.Task.Metadata.MissingScopes...), nil)
	text, _, rc = a.receipt(t, ts, a.say(t, ts, ctxID, "Rebook SKY-20931 to SK 214 on 2026-11-03 18:40"))
	if text != "Booking SKY-20931 is rebooked onto SK 214, LIS to AMS, departing 2026-11-03 18:40. The change fee of 75.00 EUR is charged to your card on file." ||
		rc.Claims.Actions[0].Tool != "rebook_flight" || !slices.Equal(rc.Claims.ScopesUsed, []string{"flights:rebook"}) {
		t.Fatalf("rebook: %q %+v", text, rc.Claims)
	}
	// A booking of another customer is not found on Ana's account.
	if text, _, _ := a.receipt(t, ts, a.say(t, ts, "", "Rebook SKY-31410 to SK 404 on 2026-12-02 09:00")); text != "I can't find booking SKY-31410 on your account." {
		t.Fatalf("another's booking: %q", text)
	}

	// In the ledger: the two refusals (asked under §3 alone, then beyond
	// Ana's grant) and three receipts, with the classes the brand's tools
	// name.
	rows := a.rows(t, "SKY-20931", 5)
	want := map[string]string{"lookup_booking": "RETENTION_CLASS_READ_ONLY", "change_seat": "RETENTION_CLASS_ACCOUNT_CHANGED", "rebook_flight": "RETENTION_CLASS_MONEY_MOVED"}
	var rebook Row
	var refused []string
	for _, row := range rows {
		if row.Kind == "ROW_KIND_REFUSAL" {
			refused = append(refused, row.Principal)
			if row.RetentionClass != "RETENTION_CLASS_REFUSED" || row.Actions[0].Tool != "rebook_flight" || row.Actions[0].TargetSource != "TARGET_SOURCE_WRITER" {
				t.Errorf("refusal %+v", row)
			}
			continue
		}
		tool := ""
		if len(row.Actions) == 1 {
			tool = row.Actions[0].Tool
			// The Provider's receipts sign args that name the booking.
			if s := row.Actions[0].TargetSource; s != "TARGET_SOURCE_SIGNED_ARGS" {
				t.Errorf("row %s: target %s comes from %s; want the signed args", tool, row.Actions[0].Target, s)
			}
		}
		if row.Status != "ROW_STATUS_AUTHORIZED" || row.Principal != "sky-4471" || row.Brand != a.iface || row.RetentionClass != want[tool] {
			t.Errorf("row %s: %s %s %s %s", tool, row.Status, row.Principal, row.Brand, row.RetentionClass)
		}
		delete(want, tool)
		if tool == "rebook_flight" {
			rebook = row
		}
	}
	if len(refused) != 2 || !slices.Contains(refused, "sky-4471") || len(want) != 0 {
		t.Fatalf("refusals of %q (want one of sky-4471, beyond her grant); rows missing for %v", refused, want)
	}
	if !slices.Equal(rebook.ScopeGranted, card) {
		t.Fatalf("rebook row granted %v", rebook.ScopeGranted)
	}

	// The customer disputes the rebook: the drill answers from the ledger
	// alone, six pulls of six.
	var run struct{ Report drillReport }
	if code := a.call(t, "POST", "/v1/drills", "support", map[string]any{"rowId": rebook.ID}, &run); code != http.StatusOK {
		t.Fatalf("RunDrill = %d", code)
	}
	if d := run.Report; d.ChecksPassed != 6 || d.ChecksTotal != 6 {
		for _, p := range d.Pulls {
			t.Logf("%s %v %s", p.Name, p.Passed, p.Detail)
		}
		t.Fatalf("drill %d/%d", d.ChecksPassed, d.ChecksTotal)
	}
	if !strings.Contains(run.Report.Reply, "rebook a flight") {
		t.Errorf("drill reply %q", run.Report.Reply)
	}
}
