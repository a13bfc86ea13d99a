package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
)

// The card lists the brand's scopes in the order of its file (not sorted),
// and its skills with their examples; the consent page keeps that order
// whatever order the agent asked in.
func TestCardAndConsentKeepTheBrandsScopeOrder(t *testing.T) {
	e := newOAuthEnv(t)
	res, err := http.Get(e.base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	order := []string{`"orders:read"`, `"orders:cancel"`, `"refunds:issue"`, `"account:address"`}
	last := -1
	for _, id := range order {
		i := strings.Index(string(raw), id)
		if i <= last {
			t.Fatalf("card scopes out of the brand's order at %s:\n%s", id, raw)
		}
		last = i
	}
	var card struct{ Skills []brand.Skill }
	if err := json.Unmarshal(raw, &card); err != nil || len(card.Skills) != 1 || len(card.Skills[0].Examples) == 0 {
		t.Fatalf("skills %+v %v", card.Skills, err)
	}
	page := e.consentPage(e.deviceAuth("account:address", "orders:read", "refunds:issue"))
	a, b, c := strings.Index(page, `value="orders:read"`), strings.Index(page, `value="refunds:issue"`), strings.Index(page, `value="account:address"`)
	if a < 0 || !(a < b && b < c) {
		t.Fatalf("consent page out of the brand's order:\n%s", page)
	}
}

// Intents with patterns take their arguments from the message; with words
// alone the agent asks for what it needs; the tool's when guards it.
func TestPatternArgumentsAndReplyTemplates(t *testing.T) {
	e := newOAuthEnv(t)
	at := e.deviceToken([]string{"account:address", "refunds:issue"}, []string{"account:address", "refunds:issue"})["access_token"].(string)
	code, out, _ := e.send(at, "", "m1", "please change my address for A-5531")
	if code != 200 || !strings.HasPrefix(text(t, out), "What is the new delivery address?") {
		t.Fatalf("prompt: %d %v", code, out)
	}
	ctxID := out["message"].(map[string]any)["contextId"].(string)
	code, out, _ = e.send(at, ctxID, "m2", "Change the address of A-5531 to 7 Pine Road, Springfield")
	if code != 200 || text(t, out) != "The delivery address of order A-5531 is now 7 Pine Road, Springfield." {
		t.Fatalf("change: %d %v", code, out)
	}
	items := e.outbox()
	last := items[len(items)-1].Receipt
	if last == nil || len(last.Actions) != 1 || last.Actions[0].Tool != "change_address" || last.Actions[0].ArgsJSON != `{"address":"7 Pine Road, Springfield","order":"A-5531"}` {
		t.Fatalf("receipt %+v", last)
	}
	code, out, _ = e.send(at, ctxID, "m3", "refund A-5531 please")
	if code != 200 || text(t, out) != "Order A-5531 is processing: only a delivered order can be refunded." {
		t.Fatalf("refund of an undelivered order: %d %v", code, out)
	}
}

// withoutToken: stepUp answers a delegated-only action asked without a
// token with a step-up task for the tool's scope, and the ledger gets the
// refusal; chat (the default) answers in chat.
func TestWithoutTokenPolicy(t *testing.T) {
	for _, policy := range []string{"chat", "stepUp"} {
		t.Run(policy, func(t *testing.T) {
			s := strings.NewReplacer("id: acme", "id: shop", "withoutToken: chat", "withoutToken: "+policy).Replace(builtinBrand(t, "acme.yaml"))
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			brands, err := brand.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			e := newOAuthEnvWith(t, brands)
			code, out, _ := e.send("", "", "m1", "please cancel order A-5531")
			if code != 200 {
				t.Fatalf("%d %v", code, out)
			}
			task, _ := out["task"].(map[string]any)
			if policy == "chat" {
				if task != nil || !strings.Contains(text(t, out), "sign in with Acme Outfitters") {
					t.Fatalf("want a chat answer: %v", out)
				}
			} else {
				if task == nil || task["status"].(map[string]any)["state"] != "TASK_STATE_AUTH_REQUIRED" {
					t.Fatalf("want a step-up task: %v", out)
				}
				meta := task["metadata"].(map[string]any)
				if missing, _ := json.Marshal(meta["pact.missingScopes"]); string(missing) != `["orders:cancel"]` || !strings.Contains(meta["pact.verificationUriComplete"].(string), "user_code=") {
					t.Fatalf("step-up metadata %v", meta)
				}
			}
			items := e.outbox()
			if len(items) != 1 || items[0].Refusal == nil || items[0].Refusal.Action.Tool != "cancel_order" || items[0].Refusal.Action.Target != "A-5531" {
				t.Fatalf("outbox %+v, want the refusal", items)
			}
		})
	}
}

// The Provider hands its brands' retention classes to the ledger's tables.
func TestProviderRetentionTables(t *testing.T) {
	e := newOAuthEnv(t)
	tools, scopes := e.p.Retention()
	if tools["cancel_order"].String() != "money_moved" || tools["change_address"].String() != "account_changed" || scopes["orders:read"].String() != "read_only" {
		t.Fatalf("%v %v", tools, scopes)
	}
}
