package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A grant an admin revoked through a replica that runs no Provider is revoked at
// the Provider of another replica on the same row store: the agent's next
// turn under it is answered 401 invalid_token.
func TestARevocationThroughAnotherReplicaStopsTheProvider(t *testing.T) {
	pgtest.Available(t)
	dsn := pgtest.CreateDB(t)
	e := newEnv(t, dsn, 0, 0)
	p := e.startInProcess("provider", func(c *config.Config) {
		on := true
		c.Provider.Enabled = &on
		c.Provider.Listen = "127.0.0.1:0"
	})
	other := e.startInProcess("other")
	base := "http://" + p.srv.ProviderAddr() + "/a2a/acme"

	pa := func() string {
		now := time.Now()
		return e.sc.PA.Key.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": "u1", "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix()})
	}
	form := func(path string, v url.Values) map[string]any {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+pa())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return m
	}
	send := func(at, id string) (int, string) {
		body := `{"message":{"messageId":"` + id + `","role":"ROLE_USER","parts":[{"text":"what is the status of order A-88213?"}]}}`
		req, _ := http.NewRequest("POST", base+"/message:send", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+pa())
		req.Header.Set("X-A2A-User-Delegation", "Bearer "+at)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}

	da := form("/oauth/device_authorization", url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}})
	code, _ := da["user_code"].(string)
	if err := p.srv.Provider().Approve(code, "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatalf("approve %v: %v", da, err)
	}
	tok := form("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da["device_code"].(string)}})
	at, _ := tok["access_token"].(string)
	if at == "" {
		t.Fatalf("token: %v", tok)
	}
	if code, body := send(at, "m1"); code != http.StatusOK {
		t.Fatalf("a turn under the grant: %d %s", code, body)
	}
	grant := pacttest.GrantOf(t, at)
	if _, err := other.client.RevokeGrant(as(context.Background(), adminKey), &ledgerv1.RevokeGrantRequest{GrantId: grant, Note: "revoked through another replica"}); err != nil {
		t.Fatalf("RevokeGrant at the other replica: %v", err)
	}
	if code, body := send(at, "m2"); code != http.StatusUnauthorized {
		t.Fatalf("a turn under a grant revoked through another replica: %d %s, want 401", code, body)
	}
}
