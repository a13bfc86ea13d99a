package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/records"
)

// holdAgent is the scripted agent, except that its armed turn also reads
// order A-5531 and keeps its status as it saw it (a change its commit
// compares), then, having answered, waits until released. Another turn
// that changes the order meanwhile makes the held turn's commit fail after
// its agent acted and its reply (and receipt) were built.
type holdAgent struct {
	mu      sync.Mutex
	armed   bool
	held    chan struct{} // closed once the armed turn has answered
	release chan struct{}
}

func (a *holdAgent) arm() {
	a.mu.Lock()
	a.armed, a.held, a.release = true, make(chan struct{}), make(chan struct{})
	a.mu.Unlock()
}

func (a *holdAgent) Respond(ctx context.Context, t agent.Turn) (agent.Reply, error) {
	a.mu.Lock()
	armed, held, release := a.armed, a.held, a.release
	a.armed = false
	a.mu.Unlock()
	rep, err := agent.Scripted{}.Respond(ctx, t)
	if !armed || err != nil {
		return rep, err
	}
	rt := t.Brand.RecordType("order")
	rec, err := t.Records.Get(ctx, rt, "A-5531")
	if err != nil {
		return agent.Reply{}, err
	}
	if err := t.Records.Set(ctx, rt, rec, map[string]string{"status": rec["status"]}); err != nil {
		return agent.Reply{}, err
	}
	close(held)
	select {
	case <-release:
	case <-ctx.Done():
	}
	return rep, nil
}

// heldTurn sends a message that the armed holdAgent holds, runs between
// its answer and its commit, then releases it and returns its outcome.
func (e *oauthEnv) heldTurn(a *holdAgent, delegation, ctxID, id, text string, between func()) (int, map[string]any) {
	e.t.Helper()
	a.arm()
	type result struct {
		code int
		out  map[string]any
	}
	done := make(chan result, 1)
	go func() {
		code, out, _ := e.send(delegation, ctxID, id, text)
		done <- result{code, out}
	}()
	select {
	case <-a.held:
	case r := <-done:
		e.t.Fatalf("the held turn finished before it was held: %d %v", r.code, r.out)
	}
	between()
	close(a.release)
	r := <-done
	return r.code, r.out
}

// counts is what turns leave in the Provider's store: entries for the
// ledger, action log entries, and the status stored over order A-5531.
func (e *oauthEnv) counts() (outbox, actionLog int, orderStatus string) {
	e.t.Helper()
	st, err := e.st.Stats()
	if err != nil {
		e.t.Fatal(err)
	}
	f, err := e.st.Fields(records.Key{Brand: "shop", Type: "order", ID: "A-5531"})
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Outbox, st.ActionLogs, f["status"]
}

func text(t *testing.T, out map[string]any) string {
	t.Helper()
	m, _ := out["message"].(map[string]any)
	if m == nil {
		t.Fatalf("not a message: %v", out)
	}
	return m["parts"].([]any)[0].(map[string]any)["text"].(string)
}

// A delegated turn keeps its reply, its action, its action log and its
// receipt for the ledger in one transaction: a commit that fails (here:
// another turn cancelled the order first) keeps none of them, and a retry
// of the messageId then runs once, giving one reply with one receipt.
func TestReplyAndReceiptCommitTogether(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	code, first, _ := e.send(at, "", "m1", "status of A-5531")
	if code != 200 {
		t.Fatalf("first turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)
	outbox0, log0, _ := e.counts()
	if outbox0 != 1 || log0 != 1 {
		t.Fatalf("after one delegated turn: outbox %d, action log %d", outbox0, log0)
	}

	code, out := e.heldTurn(a, at, ctxID, "m2", "please cancel A-5531", func() {
		if code, other, _ := e.send(at, "", "o1", "please cancel A-5531"); code != 200 || !strings.Contains(text(t, other), "is cancelled") {
			t.Fatalf("the other context's cancel: %d %v", code, other)
		}
	})
	if code != 500 {
		t.Fatalf("a turn whose commit fails: %d %v", code, out)
	}
	outbox, log, status := e.counts()
	if outbox != outbox0+1 || log != log0+1 || status != "cancelled" {
		t.Fatalf("after the failed turn: outbox %d (want %d), action log %d (want %d), order status %q (want the other turn's cancelled)",
			outbox, outbox0+1, log, log0+1, status)
	}

	// The retry runs the turn once (the failed one left no reply behind):
	// the order is cancelled already, so one reply, one receipt, no action.
	code, out, _ = e.send(at, ctxID, "m2", "please cancel A-5531")
	if code != 200 || !strings.Contains(text(t, out), "can no longer be cancelled") {
		t.Fatalf("retry: %d %v", code, out)
	}
	again, _ := json.Marshal(out)
	code, out2, _ := e.send(at, ctxID, "m2", "please cancel A-5531")
	if b, _ := json.Marshal(out2); code != 200 || string(b) != string(again) {
		t.Fatalf("a second retry is not the stored reply: %d %s", code, b)
	}
	items := e.outbox()
	if len(items) != 3 || items[2].Receipt == nil {
		t.Fatalf("outbox %+v, want the first two receipts and one more", items)
	}
	r := items[2].Receipt
	replyID := out["message"].(map[string]any)["messageId"].(string)
	if r.MessageID != replyID || r.ContextID != ctxID || len(r.Actions) != 0 {
		t.Fatalf("queued receipt %+v for reply %s", r, replyID)
	}
	if _, log, _ := e.counts(); log != log0+1 {
		t.Fatalf("after the retry: action log %d, want %d", log, log0+1)
	}
}

// An account action refused under §3 alone is queued for the ledger only
// with the reply that refused it.
func TestRefusalCommitsWithItsReply(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	code, first, _ := e.send("", "", "m1", "hello")
	if code != 200 {
		t.Fatalf("first turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)
	code, out := e.heldTurn(a, "", ctxID, "m2", "cancel order A-5531", func() {
		if code, other, _ := e.send(at, "", "o1", "please cancel A-5531"); code != 200 {
			t.Fatalf("the other context's cancel: %d %v", code, other)
		}
	})
	if code != 500 {
		t.Fatalf("a turn whose commit fails: %d %v", code, out)
	}
	if items := e.outbox(); len(items) != 1 || items[0].Receipt == nil {
		t.Fatalf("a refusal was queued for a reply never stored: %+v", items)
	}
	if code, out, _ := e.send("", ctxID, "m2", "cancel order A-5531"); code != 200 || !strings.Contains(text(t, out), "sign in") {
		t.Fatalf("retry: %d %v", code, out)
	}
	if items := e.outbox(); len(items) != 2 || items[1].Refusal == nil || items[1].Refusal.Action.Tool != "cancel_order" {
		t.Fatalf("outbox %+v, want the receipt and one refusal", items)
	}
}

func (s *Server) lockCount() int {
	s.locks.mu.Lock()
	defer s.locks.mu.Unlock()
	return len(s.locks.held)
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The per-context lock still serialises the turns of one context, and its
// entry leaves the map with its last holder.
func TestConversationLockIsSharedAndReleased(t *testing.T) {
	e := newOAuthEnv(t)
	p := e.p
	unlockA := p.locks.lock("c1")
	got := make(chan func())
	go func() { got <- p.locks.lock("c1") }()
	waitFor(t, "the second turn to wait", func() bool {
		p.locks.mu.Lock()
		defer p.locks.mu.Unlock()
		return p.locks.held["c1"] != nil && p.locks.held["c1"].holders == 2
	})
	select {
	case <-got:
		t.Fatal("two turns of one context held its lock at once")
	default:
	}
	unlockOther := p.locks.lock("c2")
	if n := p.lockCount(); n != 2 {
		t.Fatalf("%d entries for two contexts", n)
	}
	unlockA()
	unlockB := <-got
	if n := p.lockCount(); n != 2 {
		t.Fatalf("%d entries while both contexts are held", n)
	}
	unlockB()
	unlockOther()
	if n := p.lockCount(); n != 0 {
		t.Fatalf("%d lock entries after every turn left", n)
	}
}

// Many distinct conversations leave no lock entries behind.
func TestConversationLocksDoNotAccumulate(t *testing.T) {
	e := newOAuthEnv(t)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 8, MaxIdleConnsPerHost: 8}}
	const n, workers = 300, 8
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body := fmt.Sprintf(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello %d"}]}}`, i)
				req, _ := http.NewRequest("POST", e.base+"/message:send", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+e.jwt())
				res, err := client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- fmt.Errorf("conversation %d: %d", i, res.StatusCode)
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.p.lockCount(); got != 0 {
		t.Fatalf("%d lock entries left after %d conversations, want 0", got, n)
	}
}

// bookingsBrand writes a delegating brand "shop" whose scopes are
// bookings:read and bookings:change, with intents mapped to them, and
// returns the brands to serve. edit changes the file before loading.
func bookingsBrand(t *testing.T, edit func(string) string) map[string]*brand.Brand {
	t.Helper()
	s := strings.Replace(builtinBrand(t, "acme.yaml"), "id: acme", "id: shop", 1)
	head, _, ok := strings.Cut(s, "scopes:\n")
	_, tail, ok2 := strings.Cut(s, "# The Delegated profile")
	if !ok || !ok2 {
		t.Fatal("acme.yaml changed shape")
	}
	s = head + `scopes:
  - id: bookings:read
    description: See your bookings
  - id: bookings:change
    description: Cancel or change a booking
# The Delegated profile` + tail
	body, _, _ := strings.Cut(s, "tools:\n")
	s = body + `tools:
  - name: cancel_order
    scope: bookings:change
    retention: money_moved
    when: {status: [processing]}
    set: {status: cancelled}
    unavailable: "Order {{.id}} is {{.status}} and can no longer be cancelled."
  - name: lookup_orders
    scope: bookings:read
    retention: read_only
intents:
  - tool: cancel_order
    words: [cancel]
    reply: "Order {{.id}} is cancelled."
  - tool: lookup_orders
    reply: "Order {{.id}} is {{.status}}."
`
	if edit != nil {
		s = edit(s)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	brands, err := brand.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return brands
}

func (e *oauthEnv) deviceCount() int {
	e.t.Helper()
	st, err := e.st.Stats()
	if err != nil {
		e.t.Fatal(err)
	}
	return st.DeviceAuthorizations
}

// PACT §5.2, §5.5: the step-up names the scope the Brand's file maps the
// intent to, an id on its card, and the consent page shows its description.
func TestStepUpNamesTheBrandsOwnScopes(t *testing.T) {
	e := newOAuthEnvWith(t, bookingsBrand(t, nil))
	read := e.deviceToken([]string{"bookings:read"}, []string{"bookings:read"})["access_token"].(string)
	code, out, _ := e.send(read, "", "m1", "status of A-5531")
	if code != 200 || !strings.Contains(text(t, out), "processing") {
		t.Fatalf("read: %d %v", code, out)
	}
	ctxID := out["message"].(map[string]any)["contextId"].(string)
	rc := out["message"].(map[string]any)["metadata"].(map[string]any)["pact.receipt"].(map[string]any)["claims"].(map[string]any)
	if used, _ := json.Marshal(rc["scopesUsed"]); string(used) != `["bookings:read"]` {
		t.Fatalf("read receipt scopes used %s", used)
	}
	code, out, _ = e.send(read, ctxID, "m2", "please cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if code != 200 || task == nil {
		t.Fatalf("step-up: %d %v", code, out)
	}
	meta := task["metadata"].(map[string]any)
	if missing, _ := json.Marshal(meta["pact.missingScopes"]); string(missing) != `["bookings:change"]` {
		t.Fatalf("missing scopes %s, want only the brand's own bookings:change", missing)
	}
	page := e.consentPage(map[string]any{"verification_uri_complete": meta["pact.verificationUriComplete"]})
	if !strings.Contains(page, "Cancel or change a booking") || strings.Contains(page, "orders:") {
		t.Fatalf("consent page for the step-up:\n%s", page)
	}
	both := e.deviceToken([]string{"bookings:read", "bookings:change"}, []string{"bookings:read", "bookings:change"})["access_token"].(string)
	code, out, _ = e.send(both, ctxID, "m3", "please cancel A-5531")
	if code != 200 || !strings.Contains(text(t, out), "is cancelled") {
		t.Fatalf("after step-up: %d %v", code, out)
	}
	rc = out["message"].(map[string]any)["metadata"].(map[string]any)["pact.receipt"].(map[string]any)["claims"].(map[string]any)
	if used, _ := json.Marshal(rc["scopesUsed"]); string(used) != `["bookings:change"]` {
		t.Fatalf("cancel receipt scopes used %s", used)
	}
}

// A Brand that defines no scope for an intent: the agent says in chat that
// it cannot do that here; no step-up, no device authorization.
func TestIntentWithoutABrandScopeIsAnsweredInChat(t *testing.T) {
	brands := bookingsBrand(t, func(s string) string {
		return strings.Replace(s, "    scope: bookings:change\n", "", 1)
	})
	e := newOAuthEnvWith(t, brands)
	read := e.deviceToken([]string{"bookings:read"}, []string{"bookings:read"})["access_token"].(string)
	devices := e.deviceCount()
	code, out, _ := e.send(read, "", "m1", "please cancel A-5531")
	if code != 200 || out["task"] != nil || text(t, out) != "I can't do that here." {
		t.Fatalf("cancel at a brand without a scope for it: %d %v", code, out)
	}
	rc := out["message"].(map[string]any)["metadata"].(map[string]any)["pact.receipt"].(map[string]any)["claims"].(map[string]any)
	if len(rc["actions"].([]any)) != 0 || len(rc["scopesUsed"].([]any)) != 0 {
		t.Fatalf("receipt of a chat answer %v", rc)
	}
	if n := e.deviceCount(); n != devices {
		t.Fatalf("a device authorization was started: %d, was %d", n, devices)
	}
	if _, _, status := e.counts(); status != "" {
		t.Fatalf("order status changed to %q", status)
	}
}

// needAgent asks for a step-up for fixed scope ids.
type needAgent struct{ scopes []string }

func (a needAgent) Respond(_ context.Context, t agent.Turn) (agent.Reply, error) {
	return agent.Reply{Text: "I need your permission.", NeedScopes: a.scopes}, nil
}

// An agent's step-up goes through the device authorization endpoint's
// scope check: an id not on the card is never put on a consent page; the
// turn is answered in chat.
func TestStepUpScopesAreCheckedAgainstTheCard(t *testing.T) {
	tests := []struct {
		name    string
		scopes  []string
		stepUp  bool
		missing string
	}{
		{"on the card", []string{"bookings:change"}, true, `["bookings:change"]`},
		{"repeated", []string{"bookings:change", "bookings:change"}, true, `["bookings:change"]`},
		{"not on the card", []string{"orders:cancel"}, false, ""},
		{"one of two not on the card", []string{"bookings:change", "refunds:issue"}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newOAuthEnvWith(t, bookingsBrand(t, nil))
			read := e.deviceToken([]string{"bookings:read"}, []string{"bookings:read"})["access_token"].(string)
			e.p.cfg.Agent = needAgent{tc.scopes}
			devices := e.deviceCount()
			code, out, _ := e.send(read, "", "m1", "do something")
			if code != 200 {
				t.Fatalf("%d %v", code, out)
			}
			task, _ := out["task"].(map[string]any)
			if !tc.stepUp {
				if task != nil || text(t, out) != "I can't do that here." {
					t.Fatalf("want a chat answer, got %v", out)
				}
				if n := e.deviceCount(); n != devices {
					t.Fatal("a device authorization was started for a scope not on the card")
				}
				return
			}
			if task == nil {
				t.Fatalf("want a step-up, got %v", out)
			}
			if missing, _ := json.Marshal(task["metadata"].(map[string]any)["pact.missingScopes"]); string(missing) != tc.missing {
				t.Fatalf("missing scopes %s, want %s", missing, tc.missing)
			}
		})
	}
}

// actAndAskAgent cancels order id under the token's orders:cancel and, in
// the same reply, asks for a step-up of need: what a brand's own agent (an
// LLM) may answer.
type actAndAskAgent struct {
	id   string
	need []string
}

func (a actAndAskAgent) Respond(ctx context.Context, t agent.Turn) (agent.Reply, error) {
	rt := t.Brand.RecordType("order")
	rec, err := t.Records.Get(ctx, rt, a.id)
	if err != nil || rec == nil {
		return agent.Reply{}, fmt.Errorf("order %s: %v", a.id, err)
	}
	if err := t.Records.Set(ctx, rt, rec, map[string]string{"status": "cancelled"}); err != nil {
		return agent.Reply{}, err
	}
	return agent.Reply{Text: "Order " + a.id + " is cancelled. I also need your permission for more.",
		Actions:    []agent.Action{{Tool: "cancel_order", Target: a.id, ArgsJSON: `{"order":"` + a.id + `"}`}},
		ScopesUsed: []string{"orders:cancel"}, NeedScopes: a.need, State: json.RawMessage(`{"cancelled":"` + a.id + `"}`)}, nil
}

// A turn answered with a step-up task (PACT §5.5), or with the plain
// answer that replaces a step-up of a scope the card does not name, keeps
// none of its agent's record changes: no receipt names its actions (the
// step-up task carries none, and the plain answer's names none), so a
// change kept would be one no receipt or ledger row shows. The agent acts
// once the personal agent sends again with the new token.
func TestAStepUpTurnKeepsNoChange(t *testing.T) {
	tests := []struct {
		name   string
		need   []string
		stepUp bool
	}{
		{"answered with a step-up task", []string{"refunds:issue"}, true},
		{"answered in chat for a scope not on the card", []string{"nope:scope"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newOAuthEnv(t)
			at := e.deviceToken([]string{"orders:cancel"}, []string{"orders:cancel"})["access_token"].(string)
			e.p.cfg.Agent = actAndAskAgent{id: "A-5531", need: tc.need}
			code, out, _ := e.send(at, "", "m1", "cancel A-5531 and refund it")
			if code != 200 {
				t.Fatalf("%d %v", code, out)
			}
			if task, _ := out["task"].(map[string]any); (task != nil) != tc.stepUp || !tc.stepUp && text(t, out) != "I can't do that here." {
				t.Fatalf("answer %v, want a step-up task: %v", out, tc.stepUp)
			}
			if _, actionLog, status := e.counts(); status == "cancelled" || actionLog != 0 {
				t.Errorf("order A-5531 %q with %d action log entries, after a turn answered without a receipt naming its action", status, actionLog)
			}
			for _, it := range e.outbox() {
				if r := it.Receipt; r != nil && len(r.Actions) > 0 {
					t.Errorf("a receipt names %d actions of a turn that kept none", len(r.Actions))
				}
			}
			// Nor the agent's state that remembers the action done: the
			// turn runs again with the new token, and must act then.
			reply, _ := out["task"].(map[string]any)
			if reply == nil {
				reply, _ = out["message"].(map[string]any)
			}
			ctxID, _ := reply["contextId"].(string)
			c, err := e.p.cfg.Store.Conversation(ctxID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(c.State), "cancelled") {
				t.Errorf("the conversation %q keeps the agent's state %s of a turn that kept none of its actions", ctxID, c.State)
			}
		})
	}
}

// RFC 9110 §11.1: the Bearer scheme name is case-insensitive, on the
// personal-agent JWT and the delegation token, at every endpoint.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR", "Bearer "} {
		t.Run(scheme, func(t *testing.T) {
			e := newOAuthEnv(t)
			auth := func(tok string) string { return scheme + " " + tok }
			post := func(path, ctype, body, pa, del string) (int, map[string]any) {
				t.Helper()
				req, _ := http.NewRequest("POST", e.base+path, strings.NewReader(body))
				req.Header.Set("Content-Type", ctype)
				req.Header.Set("Authorization", auth(pa))
				if del != "" {
					req.Header.Set("X-A2A-User-Delegation", auth(del))
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var m map[string]any
				_ = json.NewDecoder(res.Body).Decode(&m)
				return res.StatusCode, m
			}
			form := "application/x-www-form-urlencoded"
			pa := e.jwt()
			code, da := post("/oauth/device_authorization", form, url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}.Encode(), pa, "")
			if code != 200 {
				t.Fatalf("device authorization: %d %v", code, da)
			}
			if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
				t.Fatal(err)
			}
			code, tok := post("/oauth/token", form, url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}.Encode(), e.jwt(), "")
			if code != 200 {
				t.Fatalf("token: %d %v", code, tok)
			}
			at := tok["access_token"].(string)
			pa = e.jwt()
			code, out := post("/message:send", "application/json", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"status of A-5531"}]}}`, pa, at)
			if code != 200 || out["message"].(map[string]any)["metadata"] == nil {
				t.Fatalf("delegated message: %d %v", code, out)
			}
			// The tokens go to the ledger bare, without the scheme name.
			items := e.outbox()
			if len(items) != 1 || items[0].Receipt == nil || items[0].Receipt.RequestJWT != pa || items[0].Receipt.DelegationToken != at {
				t.Fatalf("queued receipt %+v", items)
			}
			// The device authorization keeps the request JWT bare too: a
			// denial puts it on record.
			pa = e.jwt()
			code, da2 := post("/oauth/device_authorization", form, url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}.Encode(), pa, "")
			if code != 200 {
				t.Fatalf("device authorization: %d %v", code, da2)
			}
			if err := e.deny(da2["user_code"].(string), "acct-48213"); err != nil {
				t.Fatal(err)
			}
			items = e.outbox()
			if len(items) != 2 || items[1].Refusal == nil || items[1].Refusal.RequestJWT != pa {
				t.Fatalf("queued refusal %+v, want request JWT %q", items, pa)
			}
		})
	}
}

func TestBearerTokenParsing(t *testing.T) {
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"Bearer abc ", "abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearerabc", "", false},
		{"Basic abc", "", false},
		{"Bearer a b", "", false},
		{"Bearer\tabc", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := bearerToken(tc.header)
		if got != tc.want || ok != tc.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}
