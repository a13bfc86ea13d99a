package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/customer"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact/brand"
)

// answer is what the personal agent sees of a reply: the chat text, or
// the step-up task's state, message and missing scopes (the task and
// context ids and the sign-in link are new each time).
func answer(t *testing.T, out map[string]any) string {
	t.Helper()
	if task, _ := out["task"].(map[string]any); task != nil {
		st := task["status"].(map[string]any)
		missing, _ := json.Marshal(task["metadata"].(map[string]any)["pact.missingScopes"])
		return fmt.Sprintf("task %v %v %s", st["state"], st["message"].(map[string]any)["parts"], missing)
	}
	return "message " + text(t, out)
}

// warnings are the warnings logged that identity refusals were not
// recorded, as their attributes.
func warnings(t *testing.T, logs *syncbuf.Buffer) []map[string]any {
	t.Helper()
	return logged(t, logs, "refusals of account actions asked without a delegation grant were answered but not put on record for the ledger")
}

// logged are the log lines whose message starts with msg, as their
// attributes.
func logged(t *testing.T, logs *syncbuf.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), msg) {
			out = append(out, m)
		}
	}
	return out
}

// Past its brand's RefusalLimit, an account action asked under PACT §3
// alone gets the answer it always gets (in chat, or a step-up task) and
// no refusal is queued for the ledger: it is counted, and a warning says
// how many, at most once a minute per brand. A refusal under a grant is
// not limited.
func TestIdentityRefusalsPastTheBrandsLimitAreCounted(t *testing.T) {
	for _, policy := range []string{"chat", "stepUp"} {
		t.Run(policy, func(t *testing.T) {
			y := strings.NewReplacer("id: acme", "id: shop", "withoutToken: chat", "withoutToken: "+policy).Replace(builtinBrand(t, "acme.yaml"))
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(y), 0o600); err != nil {
				t.Fatal(err)
			}
			brands, err := brand.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			e := newOAuthEnvWith(t, brands)
			logs := &syncbuf.Buffer{}
			e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			e.cfg.RefusalLimit = Limit{Rate: 0.1, Burst: 2}
			e.restart()

			var answers []string
			ask := func(id string) {
				t.Helper()
				code, out, _ := e.send("", "", id, "please cancel order A-5531")
				if code != 200 {
					t.Fatalf("%s: %d %v", id, code, out)
				}
				answers = append(answers, answer(t, out))
			}
			for i := range 5 {
				ask(fmt.Sprint("m", i))
			}
			for i, a := range answers {
				if a != answers[0] {
					t.Fatalf("answer %d past the limit:\n%s\nwant, as the first:\n%s", i, a, answers[0])
				}
			}
			if got := len(e.refusals()); got != 2 {
				t.Fatalf("%d refusals queued, want the burst's 2", got)
			}
			if got, want := e.p.RefusalsNotRecorded(), map[string]NotRecorded{"shop": {OverRate: 3}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("not recorded: %+v, want %+v", got, want)
			}
			w := warnings(t, logs)
			if len(w) != 1 || w[0]["level"] != "WARN" || w[0]["brand"] != "shop" || w[0]["not_recorded"] != float64(1) {
				t.Fatalf("warnings %v, want one for the first not recorded", w)
			}

			// A minute on: the bucket is full again, and the next one not
			// recorded is warned of with the two before it.
			e.advance(time.Minute)
			for i := range 3 {
				ask(fmt.Sprint("n", i))
			}
			if got := len(e.refusals()); got != 4 {
				t.Fatalf("%d refusals queued, want 4", got)
			}
			w = warnings(t, logs)
			if len(w) != 2 || w[1]["not_recorded"] != float64(3) || w[1]["not_recorded_over_rate_total"] != float64(4) {
				t.Fatalf("warnings %v, want a second for 3", w)
			}

			// Under a grant that lacks the scope: the grant's User's
			// refusal, on record whatever the limit.
			read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
			if code, out, _ := e.send(read, "", "g1", "please cancel order A-5531"); code != 200 || out["task"] == nil {
				t.Fatalf("a step-up under a grant: %d %v", code, out)
			}
			if got := len(e.refusals()); got != 5 {
				t.Fatalf("%d refusals queued, want the grant's too", got)
			}
		})
	}
}

// A refusal that finds no room in the outbox spends none of its brand's
// bound: the bound counts refusals put on record, so a full share does
// not leave the brand without tokens once room is made.
func TestARefusalWithNoRoomSpendsNoneOfTheBrandsBound(t *testing.T) {
	e := newOAuthEnv(t)
	e.cfg.RefusalLimit = Limit{Rate: 0.001, Burst: 2}
	e.restart()
	ask := func(id string) {
		t.Helper()
		if code, out, _ := e.send("", "", id, "please cancel order A-5531"); code != 200 {
			t.Fatalf("%s: %d %v", id, code, out)
		}
	}
	e.cfg.Store.LimitIdentityRefusals(1)
	ask("m0")
	ask("m1")
	if got := len(e.refusals()); got != 0 {
		t.Fatalf("%d refusals queued with no room for them, want 0", got)
	}
	e.cfg.Store.LimitIdentityRefusals(0)
	for i := range 3 {
		ask(fmt.Sprint("n", i))
	}
	if got := len(e.refusals()); got != 2 {
		t.Fatalf("%d refusals queued once there was room, want the burst's 2 (the two with no room spent none)", got)
	}
	if got, want := e.p.RefusalsNotRecorded()["shop"], (NotRecorded{OverRate: 1, OverRoom: 2}); got != want {
		t.Fatalf("not recorded: %+v, want %+v", got, want)
	}
}

// A token given back by a refusal not queued after all is there for the
// next, also when a refusal was denied meanwhile (the bucket empty), as
// under a flood: the bucket itself does not take it back then.
func TestATokenGivenBackIsThereForTheNextRefusal(t *testing.T) {
	c := newRefusalCap(map[string]*brand.Brand{"shop": {}}, Limit{Rate: 0.001, Burst: 2}, slog.New(slog.DiscardHandler))
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	var gives []func()
	for i := range 2 {
		give, ok := c.take("shop", t0.Add(time.Duration(i)*time.Millisecond))
		if !ok {
			t.Fatalf("take %d: no token from a bucket of 2", i)
		}
		gives = append(gives, give)
	}
	if _, ok := c.take("shop", t0.Add(2*time.Millisecond)); ok {
		t.Fatal("a token from an empty bucket")
	}
	gives[0]()
	gives[0]() // given back twice: one token
	if _, ok := c.take("shop", t0.Add(3*time.Millisecond)); !ok {
		t.Fatal("no token, though one was given back")
	}
	if _, ok := c.take("shop", t0.Add(4*time.Millisecond)); ok {
		t.Fatal("a second token, where one was given back (twice)")
	}
}

// Tokens given back never take a brand past its burst: five refusals
// that take the bucket's five tokens and give them all back leave five,
// and an hour later five refusals are put on record at one instant, not
// ten.
func TestGivenBackTokensNeverPassTheBurst(t *testing.T) {
	c := newRefusalCap(map[string]*brand.Brand{"shop": {}}, Limit{Rate: 1, Burst: 5}, slog.New(slog.DiscardHandler))
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	var gives []func()
	for range 5 {
		give, ok := c.take("shop", t0)
		if !ok {
			t.Fatal("no token from a full bucket")
		}
		gives = append(gives, give)
	}
	for _, give := range gives {
		give()
	}
	later := t0.Add(time.Hour)
	n := 0
	for range 20 {
		if _, ok := c.take("shop", later); ok {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d refusals put on record at one instant with a burst of 5", n)
	}
}

// A User's denial past the denied consents' share of the outbox is
// honoured as ever (the page says Denied, the agent's poll gets
// access_denied) while its refusal is not queued: it is counted, and a
// warning says how many, at most once a minute per brand, as for the
// identity refusals past their bound. With room again, the next denial
// is on record.
func TestADenialPastItsShareIsHonouredAndCounted(t *testing.T) {
	e := newOAuthEnv(t)
	logs := &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	jane := customer.New(janeEmail, janePassword)
	deny := func() {
		t.Helper()
		da := e.deviceAuth("orders:read")
		pg, err := jane.Answer(context.Background(), da["verification_uri_complete"].(string), customer.Decision{Deny: true})
		if err != nil || pg.Title != "Denied" {
			t.Fatalf("deny: %v %+v", err, pg)
		}
		if code, m := e.poll(da); code != 400 || m["error"] != "access_denied" {
			t.Fatalf("the agent's poll after the denial: %d %v", code, m)
		}
	}
	e.st.LimitDeniedConsents(1)
	deny()
	deny()
	if got := len(e.refusals()); got != 0 {
		t.Fatalf("%d refusals queued with no room for denied consents, want 0", got)
	}
	if got, want := e.p.RefusalsNotRecorded()["shop"], (NotRecorded{DenialsOverRoom: 2}); got != want {
		t.Fatalf("not recorded: %+v, want %+v", got, want)
	}
	const msg = "denied consents were honoured but not put on record for the ledger"
	w := logged(t, logs, msg)
	if len(w) != 1 || w[0]["level"] != "WARN" || w[0]["brand"] != "shop" || w[0]["not_recorded"] != float64(1) {
		t.Fatalf("warnings %v, want one for the first not recorded", w)
	}
	e.advance(time.Minute)
	deny()
	if w = logged(t, logs, msg); len(w) != 2 || w[1]["not_recorded"] != float64(2) || w[1]["not_recorded_total"] != float64(3) {
		t.Fatalf("warnings %v, want a second, a minute on, for 2", w)
	}
	e.st.LimitDeniedConsents(0)
	deny()
	if rs := e.refusals(); len(rs) != 1 || rs[0].Action.Tool != "grant_delegation" {
		t.Fatalf("refusals queued once there was room: %+v, want the denial's", rs)
	}
}
