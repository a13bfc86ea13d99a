package pact

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

	bolt "go.etcd.io/bbolt"
)

// dropContextOnce is the scripted agent, except that on its first turn it
// deletes the turn's conversation record (kept in saved), so that storing
// the reply fails after the agent has acted and the receipt is built.
type dropContextOnce struct {
	p     *Provider
	mu    sync.Mutex
	armed bool
	saved map[string][]byte
}

func (a *dropContextOnce) Respond(ctx context.Context, t Turn) (Reply, error) {
	a.mu.Lock()
	armed := a.armed
	a.armed = false
	a.mu.Unlock()
	if armed {
		err := a.p.store.db.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(bContexts)
			return c.ForEach(func(k, v []byte) error {
				var conv conversation
				if err := json.Unmarshal(v, &conv); err != nil || conv.PA != t.PA || conv.Sub != t.Sub {
					return err
				}
				a.saved[string(k)] = append([]byte(nil), v...)
				return nil
			})
		})
		if err != nil {
			return Reply{}, err
		}
		err = a.p.store.db.Update(func(tx *bolt.Tx) error {
			for k := range a.saved {
				if err := tx.Bucket(bContexts).Delete([]byte(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Reply{}, err
		}
	}
	return Scripted{}.Respond(ctx, t)
}

func (a *dropContextOnce) arm() {
	a.mu.Lock()
	a.armed, a.saved = true, map[string][]byte{}
	a.mu.Unlock()
}

// restore puts the deleted conversation records back.
func (a *dropContextOnce) restore(t *testing.T) {
	t.Helper()
	err := a.p.store.db.Update(func(tx *bolt.Tx) error {
		for k, v := range a.saved {
			if err := tx.Bucket(bContexts).Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// counts is what a turn leaves in the Provider's store.
func (e *oauthEnv) counts() (outbox, actionLog int, orderStatus string) {
	_ = e.p.store.db.View(func(tx *bolt.Tx) error {
		outbox = tx.Bucket(bPipeline).Stats().KeyN
		actionLog = tx.Bucket(bActionLog).Stats().KeyN
		var m map[string]string
		_ = json.Unmarshal(tx.Bucket(bRecords).Get([]byte("shop/order/A-5531")), &m)
		orderStatus = m["status"]
		return nil
	})
	return outbox, actionLog, orderStatus
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
// receipt for the ledger in one transaction: a failure while storing the
// reply keeps none of them, and a retry of the messageId then gives one
// reply with one receipt.
func TestReplyAndReceiptCommitTogether(t *testing.T) {
	e := newOAuthEnv(t)
	agent := &dropContextOnce{p: e.p}
	e.p.cfg.Agent = agent
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

	agent.arm()
	code, out, _ := e.send(at, ctxID, "m2", "please cancel A-5531")
	if code != 500 {
		t.Fatalf("a turn whose reply cannot be stored: %d %v", code, out)
	}
	outbox, log, status := e.counts()
	if outbox != outbox0 || log != log0 || status != "" {
		t.Fatalf("after the failed turn: outbox %d (want %d), action log %d (want %d), order status %q (want unchanged)", outbox, outbox0, log, log0, status)
	}
	var marker []byte
	_ = e.p.store.db.View(func(tx *bolt.Tx) error { marker = tx.Bucket(bReplies).Get(replyKey(ctxID, "m2")); return nil })
	if marker != nil {
		t.Fatalf("a reply record was kept for the failed turn: %s", marker)
	}

	// The retry runs the turn once: one reply, one receipt, one action.
	agent.restore(t)
	code, out, _ = e.send(at, ctxID, "m2", "please cancel A-5531")
	if code != 200 || !strings.Contains(text(t, out), "is cancelled") {
		t.Fatalf("retry: %d %v", code, out)
	}
	again, _ := json.Marshal(out)
	code, out2, _ := e.send(at, ctxID, "m2", "please cancel A-5531")
	if b, _ := json.Marshal(out2); code != 200 || string(b) != string(again) {
		t.Fatalf("a second retry is not the stored reply: %d %s", code, b)
	}
	items := e.outbox()
	if len(items) != 2 || items[1].Receipt == nil {
		t.Fatalf("outbox %+v, want the first receipt and one more", items)
	}
	r := items[1].Receipt
	replyID := out["message"].(map[string]any)["messageId"].(string)
	if r.MessageID != replyID || r.ContextID != ctxID || len(r.Actions) != 1 || r.Actions[0].Tool != "cancel_order" {
		t.Fatalf("queued receipt %+v for reply %s", r, replyID)
	}
	if _, log, status := e.counts(); log != 2 || status != "cancelled" {
		t.Fatalf("after the retry: action log %d, order status %q", log, status)
	}
}

// An account action refused under §3 alone is queued for the ledger only
// with the reply that refused it.
func TestRefusalCommitsWithItsReply(t *testing.T) {
	e := newOAuthEnv(t)
	agent := &dropContextOnce{p: e.p}
	e.p.cfg.Agent = agent
	code, first, _ := e.send("", "", "m1", "hello")
	if code != 200 {
		t.Fatalf("first turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)
	agent.arm()
	if code, out, _ := e.send("", ctxID, "m2", "cancel order A-5531"); code != 500 {
		t.Fatalf("a turn whose reply cannot be stored: %d %v", code, out)
	}
	if items := e.outbox(); len(items) != 0 {
		t.Fatalf("a refusal was queued for a reply never stored: %+v", items)
	}
	agent.restore(t)
	if code, out, _ := e.send("", ctxID, "m2", "cancel order A-5531"); code != 200 || !strings.Contains(text(t, out), "sign in") {
		t.Fatalf("retry: %d %v", code, out)
	}
	if items := e.outbox(); len(items) != 1 || items[0].Refusal == nil || items[0].Refusal.Action.Tool != "cancel_order" {
		t.Fatalf("outbox %+v, want one refusal", items)
	}
}

// Two turns that both cancel one order: the commit of the second sees the
// first's change and fails, rather than cancelling twice.
func TestRecordChangeCommitsOnlyOverWhatTheTurnSaw(t *testing.T) {
	e := newOAuthEnv(t)
	b := e.brand
	rt := b.RecordType("order")
	ctx := context.Background()
	first := &turnRecords{s: e.p.store, brand: b.ID}
	second := &turnRecords{s: e.p.store, brand: b.ID}
	for _, ob := range []*turnRecords{first, second} {
		rec, err := ob.Get(ctx, rt, "a-5531")
		if err != nil || rec["status"] != "processing" || rec.ID() != "A-5531" {
			t.Fatalf("record %v %v", rec, err)
		}
		if err := ob.Set(ctx, rt, rec, map[string]string{"status": "cancelled"}); err != nil {
			t.Fatal(err)
		}
		if rec, _ := ob.Get(ctx, rt, "A-5531"); rec["status"] != "cancelled" {
			t.Fatalf("the turn does not see its own change: %v", rec)
		}
	}
	commit := func(ob *turnRecords) error {
		return e.p.store.db.Update(func(tx *bolt.Tx) error { return (&turnEffects{records: ob.changed}).write(tx) })
	}
	if err := commit(first); err != nil {
		t.Fatal(err)
	}
	if err := commit(second); err != errRecordChanged {
		t.Fatalf("second commit: %v, want errRecordChanged", err)
	}
	if rec, _ := (&turnRecords{s: e.p.store, brand: b.ID}).Get(ctx, rt, "A-5531"); rec["status"] != "cancelled" || rec["total"] != "42.50" {
		t.Fatalf("stored record %v", rec)
	}
}

// A status kept before brands defined record types (order_status, by
// brand/id) still counts, and a change commits over it.
func TestLegacyOrderStatusIsRead(t *testing.T) {
	e := newOAuthEnv(t)
	b := e.brand
	rt := b.RecordType("order")
	ctx := context.Background()
	if err := e.p.store.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bOrders).Put([]byte(b.ID+"/A-5531"), []byte("on hold")) }); err != nil {
		t.Fatal(err)
	}
	ob := &turnRecords{s: e.p.store, brand: b.ID}
	rec, err := ob.Get(ctx, rt, "A-5531")
	if err != nil || rec["status"] != "on hold" {
		t.Fatalf("record %v %v", rec, err)
	}
	if err := ob.Set(ctx, rt, rec, map[string]string{"status": "processing"}); err != nil {
		t.Fatal(err)
	}
	if err := e.p.store.db.Update(func(tx *bolt.Tx) error { return (&turnEffects{records: ob.changed}).write(tx) }); err != nil {
		t.Fatal(err)
	}
	if rec, _ := (&turnRecords{s: e.p.store, brand: b.ID}).Get(ctx, rt, "A-5531"); rec["status"] != "processing" {
		t.Fatalf("stored record %v", rec)
	}
}

func (p *Provider) lockCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.locks)
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
	unlockA := p.lock("c1")
	got := make(chan func())
	go func() { got <- p.lock("c1") }()
	waitFor(t, "the second turn to wait", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.locks["c1"] != nil && p.locks["c1"].holders == 2
	})
	select {
	case <-got:
		t.Fatal("two turns of one context held its lock at once")
	default:
	}
	unlockOther := p.lock("c2")
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
func bookingsBrand(t *testing.T, edit func(string) string) map[string]*Brand {
	t.Helper()
	builtin, err := os.ReadFile("brands/acme.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(builtin), "id: acme", "id: shop", 1)
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
	brands, err := LoadBrands(dir)
	if err != nil {
		t.Fatal(err)
	}
	return brands
}

func (e *oauthEnv) deviceCount() int {
	n := 0
	_ = e.p.store.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bDevices).Stats().KeyN; return nil })
	return n
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

func (a needAgent) Respond(_ context.Context, t Turn) (Reply, error) {
	return Reply{Text: "I need your permission.", NeedScopes: a.scopes}, nil
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
			if err := e.p.Approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
				t.Fatal(err)
			}
			code, tok := post("/oauth/token", form, url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {deviceGrant}, "device_code": {da["device_code"].(string)}}.Encode(), e.jwt(), "")
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
			var d deviceAuth
			_ = e.p.store.db.View(func(tx *bolt.Tx) error {
				h := tx.Bucket(bUserCode).Get([]byte(da["user_code"].(string)))
				return json.Unmarshal(tx.Bucket(bDevices).Get(h), &d)
			})
			if d.RequestJWT == "" || strings.ContainsAny(d.RequestJWT, " ") {
				t.Fatalf("device authorization kept request JWT %q", d.RequestJWT)
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
