package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
)

// A personal agent may name its key with a kid the ledger refuses in a
// token's header (an invisible character, or more than 512 bytes). The
// Provider refuses a JWT signed so before any turn runs under it (401):
// had it served the turn, the order would be changed and the agent hold
// a signed receipt while the ledger refused the receipt for good, leaving
// the action with no row. Nothing is served, set aside or recorded.
func TestARequestJWTTheLedgerWouldRefuseIsRefusedBeforeAnyTurn(t *testing.T) {
	for name, kid := range map[string]string{
		"zero-width space": "pa\u200b2026",
		"over 512 bytes":   strings.Repeat("k", 600),
	} {
		t.Run(name, func(t *testing.T) {
			s := newShop(t)
			at := s.token(t) // a grant, got with the agent's usual key
			k := pacttest.MustKey(kid, jose.ES256)
			s.sc.PA.JWKS.Set(k, s.sc.PA.Key)
			s.sc.PA.Key = k
			body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []map[string]any{{"text": "cancel order A-5531"}}}})
			req, _ := http.NewRequest("POST", s.base+"/message:send", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+s.paJWT())
			req.Header.Set("X-A2A-User-Delegation", "Bearer "+at)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(raw), "pact.receipt") {
				t.Fatalf("a turn under a request JWT whose kid the ledger refuses: %d %s; want 401 and no receipt", res.StatusCode, raw)
			}
			if d, a := s.p.PipelineDepth(), s.p.PipelineSetAside(); d != 0 || a != 0 {
				t.Fatalf("outbox depth %d, set aside %d; want nothing queued", d, a)
			}
		})
	}
}
