package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
)

// A grant revoked in the ledger (ledgerctl revoke: RevokeGrant with an
// admin key) is revoked at the embedded Provider: the agent's next turn
// under it is answered 401 invalid_token and runs nothing, and the ledger
// gets the refusal of that request under the grant, not a receipt that
// would be an incident.
func TestALedgerRevocationStopsTheEmbeddedProvider(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	// Recorded before the revocation: a receipt of the revocation's own
	// second posted after it would be an incident (its ts is in whole
	// seconds).
	waitDepth(t, s, 0, 15*time.Second)
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

// A revocation a writer key records (a Provider's pipeline reporting its
// customers' revocations, or a leaked key) makes the grant's later
// receipts incidents but does not stop the embedded Provider: a writer
// sees every grant id, and may not cut customers' grants. An admin's
// revocation of the same grant then stops it.
func TestAWritersRevocationDoesNotStopTheEmbeddedProvider(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second) // recorded before the revocation
	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "writer",
		map[string]any{"note": "from a pipeline", "revokedAt": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}, nil); code != 200 {
		t.Fatalf("RevokeGrant with the writer key: %d", code)
	}
	s.send(t, at, "m2", "what is the status of order A-88213?") // served
	waitDepth(t, s, 0, 15*time.Second)
	var view struct{ Rows []Row }
	if code := s.call(t, "GET", "/v1/grants/"+grant, "support", nil, &view); code != 200 {
		t.Fatalf("GetGrant: %d", code)
	}
	if len(view.Rows) != 2 || view.Rows[0].Status != "ROW_STATUS_INCIDENT" || view.Rows[1].Status != "ROW_STATUS_AUTHORIZED" {
		var kinds []string
		for _, r := range view.Rows {
			kinds = append(kinds, r.Kind+" "+r.Status)
		}
		t.Fatalf("grant %s lists %v, want its receipt and an incident, the receipt served after the writer's revocation", grant, kinds)
	}

	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "admin", map[string]any{"note": "fraud case 4411"}, nil); code != 200 {
		t.Fatalf("RevokeGrant with the admin key: %d", code)
	}
	if code, body := s.sendRaw(t, at, "m3", "what is the status of order A-88213?"); code != http.StatusUnauthorized {
		t.Fatalf("a turn after an admin's revocation: %d %s, want 401", code, body)
	}
}
