package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
)

// A delegated turn at the embedded Provider lands in the ledger through the
// Provider's pipeline, verified AUTHORIZED with the right retention class.
func TestProviderReceiptsLandInTheLedger(t *testing.T) {
	brands := t.TempDir()
	builtin, err := os.ReadFile("../../pact/brands/acme.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(brands, "shop.yaml"), []byte(strings.Replace(string(builtin), "id: acme", "id: shop", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "writer.key")
	if err := os.WriteFile(keyFile, []byte(keys["writer"]), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.Provider.BrandsDir = brands
		c.Provider.LedgerKeyFile = keyFile
	})
	p := e.srv.Provider()
	base := "http://" + e.srv.ProviderAddr() + "/a2a/shop"
	paJWT := func() string {
		now := time.Now()
		return e.sc.PA.Key.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": "u1", "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()})
	}
	form := func(path string, v url.Values) map[string]any {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+paJWT())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return m
	}
	da := form("/oauth/device_authorization", url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read orders:cancel"}})
	if err := p.Approve(da["user_code"].(string), "acct-48213", []string{"orders:read", "orders:cancel"}); err != nil {
		t.Fatal(err)
	}
	tok := form("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da["device_code"].(string)}})
	at, _ := tok["access_token"].(string)
	if at == "" {
		t.Fatalf("token: %v", tok)
	}
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []map[string]any{{"text": "cancel order A-5531"}}}})
	req, _ := http.NewRequest("POST", base+"/message:send", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+paJWT())
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+at)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(raw), "pact.receipt") {
		t.Fatalf("send: %d %s", res.StatusCode, raw)
	}
	// The receipt reaches the ledger, verified.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var list struct{ Rows []Row }
		e.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
		if len(list.Rows) == 1 {
			r := list.Rows[0]
			if r.Status != "ROW_STATUS_AUTHORIZED" || r.RetentionClass != "RETENTION_CLASS_MONEY_MOVED" || r.Principal != "acct-48213" || r.Brand != base {
				t.Fatalf("row %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receipt never reached the ledger (pipeline depth %d)", p.PipelineDepth())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.PipelineDepth() != 0 {
		t.Fatalf("pipeline depth %d", p.PipelineDepth())
	}
}
