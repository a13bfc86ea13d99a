package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// A row removed by the retention sweeper is shown as expired under its
// class on its date (410), not as an error.
func TestSweptRowShowsExpired(t *testing.T) {
	var id string
	e := newEnv(t, func(e *env) {
		old := time.Now().UTC().AddDate(-1, 0, 0)
		id = e.recordBefore(t, old, e.sc.Mint(pacttest.Spec{Target: "OLD-1", At: old, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})).ID
	})
	// ledgerd sweeps at start; a sweep now makes sure it is done.
	if _, err := e.client.Sweep(as(config.RoleAdmin), &ledgerv1.SweepRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.GetRow(as(config.RoleSupport), &ledgerv1.GetRowRequest{Id: id})
	var until string
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			until = info.GetMetadata()["retainUntil"]
		}
	}
	if len(until) < 10 {
		t.Fatalf("GetRow of the swept row: %v", err)
	}
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	code, body := c.get(t, "/console/rows/"+id)
	want := `Expired under class <b id="expired-class">read only</b> on <b id="expired-date">` + until[:10] + `</b>`
	if code != http.StatusGone || !strings.Contains(body, want) || strings.Contains(body, `class="state error"`) {
		t.Fatalf("swept row page = %d, want %q in:\n%s", code, want, body)
	}
}

// Incidents: open and closed, the platform's other rows that day, closing
// for admin keys only.
func TestIncidentsOpenAndClose(t *testing.T) {
	e := newEnv(t, nil)
	at := time.Date(2026, 10, 7, 11, 3, 51, 0, time.UTC)
	inc := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-22760", Target: "plan-9T4K", At: at, ScopesUsed: []string{"plan:change"}}))
	if inc.GetIncidentId() == "" {
		t.Fatalf("no incident for %v", inc.GetStatus())
	}
	for i, d := range []time.Duration{time.Hour, 2 * time.Hour, 26 * time.Hour} {
		e.record(t, e.sc.Mint(pacttest.Spec{Target: "O-" + string(rune('a'+i)), At: at.Truncate(24 * time.Hour).Add(d), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	}
	incPath := "/console/incidents/" + inc.GetIncidentId()

	aud := e.newWebClient(t)
	aud.signIn(t, config.RoleAuditor)
	if code, body := aud.get(t, "/console/incidents"); code != 200 || !strings.Contains(body, incPath) || !strings.Contains(body, "Open (1)") {
		t.Fatalf("incidents = %d", code)
	}
	code, body := aud.get(t, incPath)
	if code != 200 || !strings.Contains(body, "other rows that day <span class=\"muted\">(2)</span>") || strings.Count(body, `class="row-link`) != 2 {
		t.Fatalf("incident page = %d:\n%s", code, body)
	}
	if strings.Contains(body, "close-incident") {
		t.Fatal("auditor sees the close button")
	}
	resp, body := aud.post(t, incPath+"/close", url.Values{"csrf": {aud.csrf}, "note": {"forged"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Not allowed for your key") {
		t.Fatalf("auditor closing = %d", resp.StatusCode)
	}

	adm := e.newWebClient(t)
	adm.signIn(t, config.RoleAdmin)
	if _, body := adm.get(t, incPath); !strings.Contains(body, `id="close-incident"`) {
		t.Fatal("admin sees no close button")
	}
	resp, _ = adm.post(t, incPath+"/close", url.Values{"csrf": {adm.csrf}, "note": {"platform fixed its scope handling"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin closing = %d", resp.StatusCode)
	}
	got, err := e.client.GetIncident(as(config.RoleAuditor), &ledgerv1.GetIncidentRequest{Id: inc.GetIncidentId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetIncident().GetOpen() || got.GetIncident().GetClosedBy() != "admin-key" {
		t.Fatalf("incident after close: %+v", got.GetIncident())
	}
	if code, body := aud.get(t, "/console/incidents?state=closed"); code != 200 || !strings.Contains(body, incPath) || !strings.Contains(body, "Closed (1)") {
		t.Fatalf("closed incidents = %d", code)
	}
	if _, body := aud.get(t, "/console/incidents"); !strings.Contains(body, `id="no-incidents"`) {
		t.Fatal("no empty state for no open incidents")
	}
	if !strings.Contains(e.logs.String(), `action="close incident" key=admin-key incident=`+inc.GetIncidentId()+" outcome=ok") {
		t.Errorf("close not logged:\n%s", e.logs.String())
	}
}

// A read-only turn keeps no evidence bytes, so its page offers no dispute
// drill and says why; a row that changed something offers it.
func TestReadOnlyRowOffersNoDrill(t *testing.T) {
	e := newEnv(t, nil)
	at := time.Date(2026, 10, 7, 13, 40, 0, 0, time.UTC)
	lookup := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5532", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at}))
	cancel := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: at}))
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	code, body := c.get(t, "/console/rows/"+lookup.GetId())
	if code != http.StatusOK || strings.Contains(body, `id="run-drill"`) || !strings.Contains(body, `id="drill-read-only"`) {
		t.Errorf("read-only row page = %d, want no drill button and the reason:\n%s", code, body)
	}
	if strings.Contains(body, "holds the stored receipt") || !strings.Contains(body, "keeps no receipt, request JWT, delegation token or action log bytes") {
		t.Errorf("the read-only row page says its evidence download holds bytes it does not keep:\n%s", body)
	}
	code, body = c.get(t, "/console/rows/"+cancel.GetId())
	if code != http.StatusOK || !strings.Contains(body, `id="run-drill"`) || strings.Contains(body, `id="drill-read-only"`) {
		t.Errorf("cancelled order's row page = %d, want the drill button:\n%s", code, body)
	}
	if !strings.Contains(body, "holds the stored receipt, request JWT, delegation token, action log") || !strings.Contains(body, "<dt>Receipt id</dt>") {
		t.Errorf("the cancelled order's row page: evidence note or receipt id label missing:\n%s", body)
	}
}

// A refusal's page names its hash as the refusal record's, not a
// receipt's: no receipt was presented.
func TestRefusalPageNamesNoReceipt(t *testing.T) {
	e := newEnv(t, nil)
	resp, err := e.client.AppendRefusal(as(config.RoleWriter), &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-30418",
		Action: &ledgerv1.RefusalAction{Tool: "change_address", Target: "acct-30418"}, Reason: "no receipt; routed to human", ObservedAt: timestamppb.New(time.Now().Add(-time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	code, body := c.get(t, "/console/rows/"+resp.GetRow().GetId())
	if code != http.StatusOK || strings.Contains(body, "<dt>Receipt id</dt>") || !strings.Contains(body, "<dt>Refusal record hash</dt>") || strings.Contains(body, "holds the stored receipt") {
		t.Errorf("refusal row page = %d:\n%s", code, body)
	}
}

// A grant's page shows an admin's revocation after a writer's earlier
// one with the admin's key name and note beside the writer's, which
// stays the revocation in force; the JSON export carries them.
func TestGrantPageShowsTheAdminsRevocation(t *testing.T) {
	e, _, c := newSupportLead(t)
	const grant = "a2agrant_7Q2F"
	at := func(s string) *timestamppb.Timestamp {
		tm, _ := time.Parse(time.RFC3339, s)
		return timestamppb.New(tm)
	}
	if _, err := e.client.RevokeGrant(as(config.RoleWriter), &ledgerv1.RevokeGrantRequest{GrantId: grant, RevokedAt: at("2026-10-07T13:10:00Z"), Note: "customer revoked in settings"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.RevokeGrant(as(config.RoleAdmin), &ledgerv1.RevokeGrantRequest{GrantId: grant, RevokedAt: at("2026-10-07T14:00:00Z"), Note: "customer asked by phone"}); err != nil {
		t.Fatal(err)
	}
	code, body := c.get(t, "/console/grant?id="+grant)
	for _, w := range []string{"by writer-key: customer revoked in settings", `datetime="2026-10-07T14:00:00Z"`,
		`<span id="admin-revocation">an admin's revocation by admin-key, recorded `, "</time>: customer asked by phone</span>"} {
		if code != http.StatusOK || !strings.Contains(body, w) {
			t.Errorf("grant page = %d, lacks %q:\n%s", code, w, body)
		}
	}
	code, body = c.get(t, "/console/grant/export?id="+grant+"&format=json")
	var exp struct {
		Revocation struct{ By, AdminBy, AdminNote string }
	}
	if err := json.Unmarshal([]byte(body), &exp); code != http.StatusOK || err != nil || exp.Revocation.By != "writer-key" ||
		exp.Revocation.AdminBy != "admin-key" || exp.Revocation.AdminNote != "customer asked by phone" {
		t.Errorf("grant export = %d (%v), lacks the admin's record:\n%s", code, err, body)
	}
}

// A grant's page shows the revocation its brand's Provider signed and
// reported, which stops the embedded Provider when the brand is its own,
// and the JSON export carries it.
func TestGrantPageShowsTheProvidersRevocation(t *testing.T) {
	e, _, c := newSupportLead(t)
	const grant = "a2agrant_S3"
	stmt := e.sc.Brand.Key.SignTyp(verifier.RevocationTyp, verifier.RevocationClaims{Issuer: e.sc.AuthServer, Brand: e.sc.Brand.ID, GrantID: grant,
		RevokedAt: "2026-10-07T13:10:00Z", IssuedAt: 1791378600})
	if _, err := e.client.RevokeGrant(as(config.RoleWriter), &ledgerv1.RevokeGrantRequest{GrantId: grant, ProviderStatement: stmt, Note: "revoked on the account page"}); err != nil {
		t.Fatal(err)
	}
	code, body := c.get(t, "/console/grant?id="+grant)
	for _, w := range []string{`datetime="2026-10-07T13:10:00Z"`, "if it is the Provider of <code>" + e.sc.Brand.ID + "</code>",
		`<span id="provider-revocation">the revocation it signed and reported</span>`} {
		if code != http.StatusOK || !strings.Contains(body, w) {
			t.Errorf("grant page = %d, lacks %q:\n%s", code, w, body)
		}
	}
	if strings.Contains(body, "the Provider is not stopped") {
		t.Errorf("grant page says the Provider is not stopped:\n%s", body)
	}
	code, body = c.get(t, "/console/grant/export?id="+grant+"&format=json")
	var exp struct {
		Revocation struct{ ProviderRevokedAt, ProviderBrand string }
	}
	if err := json.Unmarshal([]byte(body), &exp); code != http.StatusOK || err != nil || exp.Revocation.ProviderRevokedAt != "2026-10-07T13:10:00Z" ||
		exp.Revocation.ProviderBrand != e.sc.Brand.ID {
		t.Errorf("grant export = %d (%v), lacks the Provider's revocation:\n%s", code, err, body)
	}
}

// A row's dispute form offers "resolved incident" only for a row that
// names an incident: ledgerd refuses it for any other, and says so when a
// post asks for it all the same.
func TestDisputeFormOffersIncidentForAnIncidentsRow(t *testing.T) {
	e, row, c := newSupportLead(t)
	const incidentOption = `<option value="DISPUTE_STATUS_RESOLVED_INCIDENT">`
	code, body := c.get(t, "/console/rows/"+row.GetId())
	if code != http.StatusOK || !strings.Contains(body, `<option value="DISPUTE_STATUS_RESOLVED_OTHER">`) || strings.Contains(body, incidentOption) {
		t.Errorf("row page of a row with no incident = %d, offers resolving it as an incident, or no resolution:\n%s", code, body)
	}
	resp, body := c.post(t, "/console/rows/"+row.GetId()+"/disputes", url.Values{"csrf": {c.csrf}, "status": {"DISPUTE_STATUS_RESOLVED_INCIDENT"}, "note": {"x"}})
	if resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, "names no incident") {
		t.Errorf("resolving a row with no incident as one = %d:\n%s", resp.StatusCode, body)
	}
	inc := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-22760", Target: "plan-9T4K", At: time.Date(2026, 10, 7, 11, 3, 51, 0, time.UTC), ScopesUsed: []string{"plan:change"}}))
	if inc.GetIncidentId() == "" {
		t.Fatalf("no incident for %v", inc.GetStatus())
	}
	if code, body := c.get(t, "/console/rows/"+inc.GetId()); code != http.StatusOK || !strings.Contains(body, incidentOption) {
		t.Errorf("row page of an incident's row = %d, does not offer resolving it as the incident:\n%s", code, body)
	}
}

// The search's status filter names each status in words, keeping the
// enum name as the value it sends, and shows the one chosen selected.
func TestSearchStatusFilterInWords(t *testing.T) {
	_, _, c := newSupportLead(t)
	code, body := c.get(t, "/console/search?q=A-5531&status=ROW_STATUS_INCIDENT")
	for _, w := range []string{`<option value="ROW_STATUS_AUTHORIZED">authorized</option>`, `<option value="ROW_STATUS_UNAUTHORIZED">unauthorized</option>`,
		`<option value="ROW_STATUS_INCIDENT" selected>incident</option>`, `<option value="ROW_STATUS_DUPLICATE">duplicate</option>`} {
		if code != http.StatusOK || !strings.Contains(body, w) {
			t.Errorf("search = %d, lacks %s", code, w)
		}
	}
	if strings.Contains(body, ">ROW_STATUS_") {
		t.Errorf("search shows an enum name:\n%s", body)
	}
}
