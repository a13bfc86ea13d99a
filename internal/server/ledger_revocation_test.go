package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A grant revoked in the ledger (ledgerctl revoke: RevokeGrant with an
// admin key) is revoked at the embedded Provider: the agent's next turn
// under it is answered 401 invalid_token and runs nothing, and the ledger
// gets the refusal of that request under the grant, not a receipt that
// would be an incident.
func TestALedgerRevocationStopsTheEmbeddedProvider(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := grantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "admin", map[string]any{"note": "fraud case 4411"}, nil); code != 200 {
		t.Fatalf("RevokeGrant: %d", code)
	}
	if code, body := s.sendRaw(t, at, "m2", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a turn under a grant the ledger records revoked: %d %s, want 401", code, body)
	}
	waitDepth(t, s, 0, 15*time.Second)
	var view struct{ Rows []Row }
	if code := s.call(t, "GET", "/v1/grants/"+grant, "support", nil, &view); code != 200 {
		t.Fatalf("GetGrant: %d", code)
	}
	var kinds []string
	for _, r := range view.Rows {
		kinds = append(kinds, r.Kind+" "+r.Status)
	}
	if len(view.Rows) != 2 || view.Rows[0].Kind != "ROW_KIND_REFUSAL" || view.Rows[1].Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("grant %s lists %v, want its receipt and the refusal of the request after the revocation", grant, kinds)
	}
	after := view.Rows[0]
	if after.Status != "ROW_STATUS_UNAUTHORIZED" || after.check("grant_not_revoked").Result != "CHECK_RESULT_FAIL" ||
		!strings.Contains(after.check("receipt_signature").Detail, "revoked") {
		t.Fatalf("the refusal after the revocation %+v", after)
	}
}
