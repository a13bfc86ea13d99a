package server_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
)

type accessRecord struct {
	Seq                                         string
	Key, Rpc, Principal, Target, GrantID, Agent string
	RowID, RowPrincipal, Object, Result         string
	Roles                                       []string
	Rows                                        int
	RowPrincipals                               []string
	RowPrincipalsTruncated                      bool
}

func (e *env) accessLog(t *testing.T, query string) []accessRecord {
	t.Helper()
	var rep struct {
		Records       []accessRecord
		NextPageToken string
	}
	if code := e.call(t, "GET", "/v1/access-log"+query, "admin", nil, &rep); code != http.StatusOK {
		t.Fatalf("GET /v1/access-log%s: %d", query, code)
	}
	return rep.Records
}

// Every read is recorded, with the key, the call, what the query named
// and the rows returned; writes are not; only an admin lists the log; the
// records outlive a restart (what is queued is written at shutdown).
func TestAccessLog(t *testing.T) {
	e, logs := newLoggingEnv(t)
	sc := e.sc

	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})), &rep)
	e.call(t, "POST", "/v1/receipts", "writer", post(sc.Mint(pacttest.Spec{User: "acct-1", Target: "B-1"})), nil)
	id := rep.Row.ID
	e.call(t, "GET", "/v1/provider/outbox", "admin", nil, nil) // what the Provider set aside names customers too
	e.call(t, "GET", "/v1/rows?principal=acct-48213", "support", nil, nil)
	e.call(t, "GET", "/v1/rows/"+id[:12], "support", nil, nil)
	e.call(t, "GET", "/v1/rows/"+id+"/evidence", "auditor", nil, nil)
	e.call(t, "GET", "/v1/grants/"+rep.Row.GrantID, "auditor", nil, nil)
	e.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "A-5531"}, nil)
	e.call(t, "GET", "/v1/rows/ffffffffffff", "support", nil, nil) // no such row (unless it is one)
	if code := e.call(t, "GET", "/v1/access-log", "support", nil, nil); code != http.StatusForbidden {
		t.Fatalf("support listing the access log: %d, want 403", code)
	}
	e.stop() // the queued records are written as ledgerd stops
	e.start(t)

	got := e.accessLog(t, "")
	want := []accessRecord{
		{Key: "admin-key", Rpc: "GetProviderOutbox", Result: "ok"},
		{Key: "support-key", Rpc: "ListRows", Principal: "acct-48213", Rows: 1, Result: "ok", RowPrincipals: []string{"acct-48213"}},
		{Key: "support-key", Rpc: "GetRow", RowID: id, RowPrincipal: "acct-48213", Rows: 1, Result: "ok"},
		{Key: "auditor-key", Rpc: "GetEvidence", RowID: id, RowPrincipal: "acct-48213", Rows: 1, Result: "ok"},
		{Key: "auditor-key", Rpc: "GetGrant", GrantID: rep.Row.GrantID, Rows: 2, Result: "ok", RowPrincipals: []string{"acct-1", "acct-48213"}}, // both receipts are under the one grant
		{Key: "support-key", Rpc: "RunDrill", Target: "A-5531", Rows: 1, Result: "ok", RowPrincipals: []string{"acct-48213"}},
		{Key: "support-key", Rpc: "GetRow", RowID: "ffffffffffff", Result: "not found"},
	}
	if strings.HasPrefix(id, "ffffffffffff") {
		want = want[:6]
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d (the refused listing and the writes are not reads):\n%+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		g.Seq, g.Roles = "", nil
		if len(g.RowPrincipals) == 0 {
			g.RowPrincipals = nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if r := got[1].Roles; len(r) != 1 || r[0] != "support" {
		t.Errorf("roles %v", r)
	}

	// Who looked up acct-48213's rows, by a query naming the customer, by
	// a row's id or with a reply that carried them? Listing the log is a
	// read too.
	who := e.accessLog(t, "?principal=acct-48213")
	if len(who) != 5 || who[0].Rpc != "ListRows" || who[1].Rpc != "GetRow" || who[2].Rpc != "GetEvidence" || who[2].Key != "auditor-key" ||
		who[3].Rpc != "GetGrant" || who[4].Rpc != "RunDrill" {
		t.Fatalf("reads of acct-48213: %+v", who)
	}
	all := e.accessLog(t, "?pageSize=2")
	if len(all) != 2 {
		t.Fatalf("a page of 2: %d", len(all))
	}
	last := e.accessLog(t, "?key=admin-key")
	if len(last) != 4 || last[0].Rpc != "GetProviderOutbox" || last[1].Rpc != "ListAccessLog" || last[1].Principal != "" || last[2].Principal != "acct-48213" {
		t.Fatalf("the admin's own reads of the log: %+v", last)
	}

	// Each read is a line in the JSON log too.
	var lines int
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "read" {
			lines++
			if m["key"] == nil || m["rpc"] == nil || m["rows"] == nil {
				t.Errorf("read log line lacks key, rpc or rows: %s", l)
			}
		}
	}
	if lines < len(want)+4 {
		t.Errorf("%d read lines in the log, want at least %d", lines, len(want)+4)
	}
}

// A read's log line holds what its access record does: a value the caller
// sent, however long and even when the read is refused, is cut to the
// record's 512 bytes, not written out whole.
func TestReadLogLineCutsLongValues(t *testing.T) {
	e, logs := newLoggingEnv(t)
	long := strings.Repeat("a", 28000)
	if code := e.call(t, "GET", "/v1/rows?principal="+long+"&target="+long, "support", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("a read with a 28,000-byte filter: %d, want 400", code)
	}
	var found bool
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "read" {
			continue
		}
		found = true
		if len(l) > 4096 {
			t.Fatalf("a read's log line of %d bytes: %.200s…", len(l), l)
		}
	}
	if !found {
		t.Fatal("no read line in the log")
	}
}

// Every listing refuses a page size outside 1 to its most, the outboxes'
// as the others (0 is the default).
func TestListingsRefuseAPageSizeOutOfBounds(t *testing.T) {
	e, _ := newLoggingEnv(t)
	for _, path := range []string{"/v1/rows", "/v1/drills", "/v1/incidents", "/v1/access-log", "/v1/outbox", "/v1/provider/outbox"} {
		for _, size := range []string{"-1", "1001"} {
			if code := e.call(t, "GET", path+"?pageSize="+size, "admin", nil, nil); code != http.StatusBadRequest {
				t.Errorf("GET %s?pageSize=%s: %d, want 400", path, size, code)
			}
		}
		if code := e.call(t, "GET", path+"?pageSize=0", "admin", nil, nil); code != http.StatusOK {
			t.Errorf("GET %s?pageSize=0: %d, want 200", path, code)
		}
	}
}

// A sweep's listing (a dry run's too) names rows, and the evidence
// outbox's dead letters name rows' objects: both are reads on record.
func TestSweepListingsAndTheOutboxAreRecorded(t *testing.T) {
	e, _ := newLoggingEnv(t)
	e.call(t, "POST", "/v1/retention:sweep", "auditor", map[string]any{"dryRun": true}, nil)
	e.call(t, "GET", "/v1/outbox", "admin", nil, nil)
	var got []string
	for _, r := range e.accessLog(t, "") {
		got = append(got, r.Key+" "+r.Rpc)
	}
	for _, want := range []string{"auditor-key Sweep", "admin-key GetOutbox"} {
		if !slices.Contains(got, want) {
			t.Errorf("access log %q lacks %q", got, want)
		}
	}
}

// "Who looked up this customer's rows" lists every read whose reply
// carried them, not only those whose query named the customer or one of
// their rows by its id: the rows of an order (a dispute's first step), an
// unfiltered listing, the grant, an incident, a drill by order and the
// monthly drill. A read that returned only another customer's rows is not
// listed. The records outlive a restart.
func TestAccessLogByPrincipalListsReadsThatReturnedTheCustomersRows(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep, inc appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})), &rep)
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-1", GrantID: "a2agrant_other", Target: "B-1"})), nil)
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "I-1",
		At: time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second), ScopesUsed: []string{"plan:change"}})), &inc)
	if inc.Row.IncidentID == "" {
		t.Fatalf("no incident: %+v", inc.Row)
	}
	reads := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/rows?target=A-5531", nil},
		{"GET", "/v1/rows", nil},
		{"GET", "/v1/grants/" + rep.Row.GrantID, nil},
		{"GET", "/v1/incidents/" + inc.Row.IncidentID, nil},
		{"POST", "/v1/drills", map[string]any{"target": "A-5531"}},
		{"POST", "/v1/drills", map[string]any{"monthly": map[string]any{"sample": 100}}},
		{"GET", "/v1/rows?target=B-1", nil}, // only acct-1's row
	}
	for _, r := range reads {
		if code := e.call(t, r.method, r.path, "support", r.body, nil); code != http.StatusOK {
			t.Fatalf("%s %s: %d", r.method, r.path, code)
		}
	}
	e.stop()
	e.start(t)

	var got []string
	for _, r := range e.accessLog(t, "?principal=acct-48213") {
		if r.Key != "support-key" {
			continue
		}
		got = append(got, r.Rpc+" "+r.Target)
		if !slices.Contains(r.RowPrincipals, "acct-48213") || r.RowPrincipalsTruncated {
			t.Errorf("%s %s: rowPrincipals %q (truncated %v), want acct-48213's among them", r.Rpc, r.Target, r.RowPrincipals, r.RowPrincipalsTruncated)
		}
	}
	want := []string{"ListRows A-5531", "ListRows ", "GetGrant ", "GetIncident ", "RunDrill A-5531", "RunDrill "}
	if !slices.Equal(got, want) {
		t.Errorf("access-log --principal acct-48213 lists support-key's reads %q, want %q", got, want)
	}
	for _, r := range e.accessLog(t, "?principal=acct-1") {
		if r.Rpc == "ListRows" && r.Target == "A-5531" {
			t.Errorf("the read of order A-5531 is listed as a read of acct-1's rows: %+v", r)
		}
	}
}

// A dispute event answers with its row whole, and its refusal names the
// row's full id and status: support's dispute events are reads the access
// log keeps, refused ones too, each with the row's id (a prefix resolved)
// and, where the row was read, whose it is.
func TestDisputeEventsAreInTheAccessLog(t *testing.T) {
	e, _ := newLoggingEnv(t)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})), &rep)
	id := rep.Row.ID
	if code := e.call(t, "POST", "/v1/rows/"+id[:8]+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_RESOLVED_INCIDENT"}, nil); code != http.StatusBadRequest {
		t.Fatalf("resolving an incident the row does not have: %d, want 400", code)
	}
	if code := e.call(t, "POST", "/v1/rows/"+id[:8]+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": "customer says no"}, nil); code != http.StatusOK {
		t.Fatalf("a dispute: %d", code)
	}
	var got []accessRecord
	for _, r := range e.accessLog(t, "") {
		if r.Rpc == "AppendDisputeEvent" {
			r.Seq, r.Roles, r.RowPrincipals = "", nil, nil
			got = append(got, r)
		}
	}
	want := []accessRecord{
		{Key: "support-key", Rpc: "AppendDisputeEvent", RowID: id, RowPrincipal: "acct-48213", Result: "failed precondition"},
		{Key: "support-key", Rpc: "AppendDisputeEvent", RowID: id, RowPrincipal: "acct-48213", Rows: 1, Result: "ok"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the access log's dispute events:\n got %+v\nwant %+v", got, want)
	}
}

// An integrity check's findings name rows by id, and what each says may
// quote the row and its evidence: the check's access record names those
// rows' customers, so that "who read acct-48213's records" finds it.
func TestAnIntegrityChecksRecordNamesTheCustomersOfItsFindings(t *testing.T) {
	e, _ := newLoggingEnv(t)
	var rep appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "T-1234"})), &rep); code != http.StatusOK {
		t.Fatalf("append = %d", code)
	}
	e.waitDrained(t)
	var ev evidenceReply
	if code := e.call(t, "GET", "/v1/rows/"+rep.Row.ID+"/evidence", "auditor", nil, &ev); code != http.StatusOK {
		t.Fatalf("evidence: %d", code)
	}
	e.editSegment(t, ev, "T-1234", "T-1235")
	e.stop()
	e.start(t)
	var check struct{ Findings []struct{ RowId string } }
	if code := e.call(t, "POST", "/v1/integrity:check", "auditor", map[string]any{}, &check); code != http.StatusOK || len(check.Findings) != 1 {
		t.Fatalf("integrity check: %d %+v; want one finding", code, check)
	}
	var found bool
	for _, r := range e.accessLog(t, "?principal=acct-48213") {
		if r.Rpc == "CheckIntegrity" {
			found = slices.Equal(r.RowPrincipals, []string{"acct-48213"})
			if !found {
				t.Errorf("the integrity check's record names customers %q, want acct-48213", r.RowPrincipals)
			}
		}
	}
	if !found {
		t.Error("no record of the integrity check among the reads of acct-48213's records")
	}
}
