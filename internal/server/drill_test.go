package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
)

type drillReport struct {
	ID           string
	Kind         string
	Rows         []string
	ChecksPassed int
	ChecksTotal  int
	Reply        string
	RunBy        string
	Pulls        []struct {
		RowID     string `json:"rowId"`
		Name      string
		Passed    bool
		ElapsedMs float64
		Detail    string
	}
}

// The playbook's worked scenario end to end through ledgerd's REST API:
// acct 48213 grants orders:cancel at 13:07, the cancel of A-5531 runs at
// 13:12 and is recorded, the dispute comes in, the drill passes all six
// pulls; then the flipped case.
func TestPlaybookDisputeDrillEndToEnd(t *testing.T) {
	e := newEnv(t, jose.ES256)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: at})
	var rep appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(r), &rep); code != 200 || rep.Row.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("append %d %s", code, rep.Row.Status)
	}
	var run struct{ Report drillReport }
	if code := e.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "A-5531", "principal": "acct-48213"}, &run); code != 200 {
		t.Fatalf("RunDrill = %d", code)
	}
	d := run.Report
	if d.Kind != "DRILL_KIND_DISPUTE" || d.ChecksPassed != 6 || d.ChecksTotal != 6 || len(d.Pulls) != 6 || d.RunBy != "support-key" {
		t.Fatalf("drill %+v", d)
	}
	var total float64
	for _, p := range d.Pulls {
		if !p.Passed {
			t.Errorf("%s failed: %s", p.Name, p.Detail)
		}
		total += p.ElapsedMs
	}
	t.Logf("six pulls took %.1f ms in all", total)
	for _, want := range []string{"13:07 UTC", "orders:read, orders:cancel", e.sc.PA.ID} {
		if !strings.Contains(d.Reply, want) {
			t.Errorf("reply lacks %q: %s", want, d.Reply)
		}
	}
	var got struct{ Report drillReport }
	if code := e.call(t, "GET", "/v1/drills/"+d.ID, "auditor", nil, &got); code != 200 || got.Report.Reply != d.Reply {
		t.Fatalf("GetDrill = %d", code)
	}

	// The flipped case: the action that ran is not the one signed.
	r2 := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5532", At: at})
	r2.Actions[0].ArgsJSON = `{"order":"A-5532","refund_to":"another card"}`
	e.call(t, "POST", "/v1/receipts", "writer", post(r2), &rep)
	if rep.Row.Status != "ROW_STATUS_INCIDENT" {
		t.Fatalf("flipped row status %s", rep.Row.Status)
	}
	e.call(t, "POST", "/v1/drills", "admin", map[string]any{"target": "A-5532"}, &run)
	flipped := run.Report
	var decision string
	for _, p := range flipped.Pulls {
		if p.Name == "decision" {
			decision = p.Detail
		}
	}
	if !strings.Contains(decision, "flips") || !strings.Contains(flipped.Reply, "not the action that was signed") {
		t.Fatalf("flipped: decision %q reply %q", decision, flipped.Reply)
	}

	var monthly struct{ Report drillReport }
	if code := e.call(t, "POST", "/v1/drills", "support", map[string]any{"monthly": map[string]any{"sample": 2}}, &monthly); code != 200 ||
		monthly.Report.Kind != "DRILL_KIND_MONTHLY" || monthly.Report.ChecksTotal != 12 {
		t.Fatalf("monthly %d %+v", code, monthly.Report)
	}
	var list struct{ Reports []drillReport }
	e.call(t, "GET", "/v1/drills", "auditor", nil, &list)
	if len(list.Reports) != 3 || list.Reports[0].ID != monthly.Report.ID {
		t.Fatalf("ListDrills: %d reports, newest first expected", len(list.Reports))
	}
	if code := e.call(t, "POST", "/v1/drills", "support", map[string]any{}, nil); code != http.StatusBadRequest {
		t.Fatalf("empty drill request = %d", code)
	}
	if code := e.call(t, "POST", "/v1/drills", "auditor", map[string]any{"target": "A-5531"}, nil); code != http.StatusForbidden {
		t.Fatalf("auditor running a drill = %d", code)
	}
}

func TestRESTGrantRevocationAndIntegrity(t *testing.T) {
	e := newEnv(t, jose.ES256)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	var rev struct {
		GrantID    string `json:"grantId"`
		Revocation struct{ RevokedAt, By string }
	}
	if code := e.call(t, "POST", "/v1/grants/a2agrant_7Q2F:revoke", "writer", map[string]any{"revokedAt": "2026-10-07T13:10:00Z", "note": "revoked by the customer"}, &rev); code != 200 ||
		rev.Revocation.RevokedAt != "2026-10-07T13:10:00Z" || rev.Revocation.By != "writer-key" {
		t.Fatalf("revoke = %d %+v", code, rev)
	}
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{At: at})), &rep)
	if rep.Row.Status != "ROW_STATUS_INCIDENT" || rep.Row.check("grant_not_revoked").Result != "CHECK_RESULT_FAIL" {
		t.Fatalf("receipt after revocation: %s %+v", rep.Row.Status, rep.Row.check("grant_not_revoked"))
	}
	var g struct {
		GrantID       string `json:"grantId"`
		ScopesGranted []string
		Revocation    *struct{ RevokedAt string }
		Rows          []Row
		RowCount      int
	}
	if code := e.call(t, "GET", "/v1/grants/a2agrant_7Q2F", "auditor", nil, &g); code != 200 || g.RowCount != 1 || g.Revocation == nil || len(g.ScopesGranted) != 2 {
		t.Fatalf("grant = %d %+v", code, g)
	}
	var ic struct {
		RowsChecked int
		Findings    []struct{ RowID string }
	}
	if code := e.call(t, "POST", "/v1/integrity:check", "auditor", map[string]any{}, &ic); code != 200 || ic.RowsChecked != 1 || len(ic.Findings) != 0 {
		t.Fatalf("integrity = %d %+v", code, ic)
	}
}

// A revocation's time lies in the ledger's range (year 1 is not "now"),
// and a writer revoking a grant someone else revoked learns when that
// revocation took effect, not who recorded it or why; an admin does.
func TestRevokeGrantBounds(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for _, at := range []string{"0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		if code := e.call(t, "POST", "/v1/grants/g_far:revoke", "writer", map[string]any{"revokedAt": at}, nil); code != http.StatusBadRequest {
			t.Errorf("revokedAt %s = %d, want 400", at, code)
		}
	}
	var g struct{ Revocation *struct{ RevokedAt string } }
	if code := e.call(t, "GET", "/v1/grants/g_far", "admin", nil, &g); code != http.StatusNotFound && (code != http.StatusOK || g.Revocation != nil) {
		t.Errorf("a grant revoked only out of range = %d %+v: recorded", code, g.Revocation)
	}

	type revocation struct{ RevokedAt, By, Note string }
	var rev struct{ Revocation revocation }
	if code := e.call(t, "POST", "/v1/grants/g_adm:revoke", "admin", map[string]any{"revokedAt": "2026-10-07T13:10:00Z", "note": "fraud case 4411"}, &rev); code != 200 || rev.Revocation.Note != "fraud case 4411" {
		t.Fatalf("admin revoking = %d %+v", code, rev)
	}
	for role, want := range map[string]revocation{
		"writer": {RevokedAt: "2026-10-07T13:10:00Z"},
		"admin":  {RevokedAt: "2026-10-07T13:10:00Z", By: "admin-key", Note: "fraud case 4411"},
	} {
		rev.Revocation = revocation{}
		if code := e.call(t, "POST", "/v1/grants/g_adm:revoke", role, map[string]any{"revokedAt": "8000-01-01T00:00:00Z", "note": "later"}, &rev); code != 200 || rev.Revocation != want {
			t.Errorf("%s revoking later = %d %+v, want %+v", role, code, rev.Revocation, want)
		}
	}
}

// A dispute drill's target and principal are names: bounded, and holding
// no NUL, control or invisible character, which the names they match
// never hold and which a report would show to whoever reads it.
func TestADrillsNamesAreChecked(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"principal": "acct-1\x00"}, "principal contains a NUL byte"},
		{map[string]any{"target": "A-1\u202e1-A"}, "target contains a control character"},
		{map[string]any{"principal": "acct\u200b-1"}, "principal contains an invisible character"},
		{map[string]any{"target": strings.Repeat("x", 513)}, "target is longer than 512 bytes"},
	} {
		var st struct{ Message string }
		if code := e.call(t, "POST", "/v1/drills", "support", tc.body, &st); code != http.StatusBadRequest || !strings.Contains(st.Message, tc.want) {
			t.Errorf("a drill of %q: %d %q, want 400 saying %q", tc.body, code, st.Message, tc.want)
		}
	}
	if code := e.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "A-1"}, nil); code != http.StatusOK {
		t.Errorf("a drill of a plain target: %d, want 200", code)
	}
}
