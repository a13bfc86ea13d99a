package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/server"
)

// ListRevocations over REST: the readers list the ledger's revocations a
// page at a time, a page ends early rather than pass the answer's bound
// (each may carry notes and a statement), a writer may not list them, and
// every listing is a read in the access log.
func TestListRevocationsOverREST(t *testing.T) {
	e, _ := newLoggingEnv(t)
	note := strings.Repeat("n", 4000)
	for _, g := range []string{"a2agrant_R1", "a2agrant_R2", "a2agrant_R3"} {
		if code := e.call(t, "POST", "/v1/grants/"+g+":revoke", "admin", map[string]any{"note": note}, nil); code != 200 {
			t.Fatalf("RevokeGrant %s: %d", g, code)
		}
	}
	type page struct {
		Revocations []struct {
			GrantID    string `json:"grantId"`
			Revocation revocationView
		}
		NextPageToken string `json:"nextPageToken"`
	}
	server.SetAnswerRowBytes(t, 1) // one revocation an answer
	var got []string
	tok := ""
	for calls := 1; ; calls++ {
		var p page
		if code := e.call(t, "GET", "/v1/revocations?pageSize=10&pageToken="+tok, "auditor", nil, &p); code != 200 {
			t.Fatalf("ListRevocations: %d", code)
		}
		if len(p.Revocations) != 1 {
			t.Fatalf("a page within a bound of one byte lists %d revocations, want one", len(p.Revocations))
		}
		got = append(got, p.Revocations[0].GrantID)
		if p.Revocations[0].Revocation.AdminRevokedAt == "" {
			t.Errorf("revocation %+v lacks the admin's", p.Revocations[0])
		}
		if tok = p.NextPageToken; tok == "" || calls > 5 {
			break
		}
	}
	if strings.Join(got, " ") != "a2agrant_R1 a2agrant_R2 a2agrant_R3" {
		t.Errorf("listed %q, want the three by grant id", got)
	}
	var none page
	if code := e.call(t, "GET", "/v1/revocations?since=2099-01-01T00:00:00Z", "support", nil, &none); code != 200 || len(none.Revocations) != 0 {
		t.Errorf("since 2099: %d %+v, want none", code, none)
	}
	if code := e.call(t, "GET", "/v1/revocations", "writer", nil, nil); code != http.StatusForbidden {
		t.Errorf("a writer listing revocations: %d, want 403", code)
	}
	if code := e.call(t, "GET", "/v1/revocations?pageToken=!!", "support", nil, nil); code != http.StatusBadRequest {
		t.Errorf("a page token the ledger did not give: %d, want 400", code)
	}
	e.stop()
	e.start(t)
	server.SetAnswerRowBytes(t, 2<<20) // the access log's answer too
	n := 0
	for _, r := range e.accessLog(t, "?key=auditor-key") {
		if r.Rpc == "ListRevocations" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("the access log holds %d of the auditor's 3 listings of revocations", n)
	}
}
