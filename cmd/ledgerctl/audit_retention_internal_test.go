package main

// The audit's check of swept rows' tombstones against the log, and the
// bounds of what it reads from the server.

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/retention"
)

// testAuditor is an auditor with nothing but an output, for the checks
// that read no server.
func testAuditor() (*auditor, *bytes.Buffer) {
	var out bytes.Buffer
	return &auditor{c: &cli{out: &out, errw: &out, timeout: 5 * time.Second}, closedAt: map[string]closure{}, tombstones: map[string]*tombstone{},
		incidentRows: map[string]incidentRow{}, incidentLeaves: map[string]incidentLeaf{}, rows: map[string]*ledgerv1.Row{}}, &out
}

func defaultPeriods() map[string]retention.Period {
	return map[string]retention.Period{"money_moved": {Months: 18}, "account_changed": {Months: 12}, "read_only": {Days: 90}, "refused": {Months: 12}, "incident": {Months: 12}}
}

// An incident row (class incident, status incident) is held by the ledger
// until its incident closes (it has no retain-until before: commitRow,
// CloseIncident), and then the incident period past the close. The
// audited tree holds no closure of the row's incident: no retention let
// the row go, however long ago it was recorded. The same row swept the
// incident period after a closure the tree holds is no finding.
func TestAuditFindsAnIncidentRowSweptWithoutItsClosure(t *testing.T) {
	for _, closed := range []bool{false, true} {
		a, out := testAuditor()
		recorded := time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second)
		a.policies = []policyLeaf{{index: 0, periods: defaultPeriods()}}
		id := strings.Repeat("ab", 32)
		leaf := map[string]string{"kind": "receipt", "row": id, "status": "incident", "class": "incident", "recorded": recorded.Format(time.RFC3339Nano)}
		if closed {
			a.closedAt[id] = closure{index: 2, incident: "INC-1", at: recorded.Add(time.Hour).Format(time.RFC3339Nano)}
		}
		tomb := tombstone{class: "incident", status: "incident",
			retainUntil: recorded.AddDate(1, 0, 1).Format(time.RFC3339), sweptAt: recorded.AddDate(1, 0, 2).Format(time.RFC3339)}
		a.tombs = []sweptLeaf{{index: 1, leaf: leaf, tomb: tomb}}
		a.checkTombstones(nil, time.Now().UTC())
		switch {
		case !closed && len(a.mismatches) == 0:
			t.Fatalf("an incident row swept while the audited tree holds no closure of its incident passes the audit:\n%s", out)
		case !closed && !strings.Contains(a.mismatches[0], "no closure of the incident the row opened"):
			t.Fatalf("mismatch: %s", a.mismatches[0])
		case closed && len(a.mismatches) != 0:
			t.Fatalf("an incident row swept the incident period after its closure: %v", a.mismatches)
		}
	}
}

// ledgerd never writes a period of 0 (retention.Policy.Validate refuses a
// class without a positive period): a policy leaf that says "money_moved
// 0 days" licenses no sweep, and a row swept two seconds after it was
// recorded is a finding against the periods of the ledger's other policy
// leaves.
func TestAuditDoesNotTakeAZeroPeriodPolicyLeaf(t *testing.T) {
	a, out := testAuditor()
	recorded := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	forged := policyPeriods(map[string]string{"kind": "policy", "money_moved": "0 days", "account_changed": "0 days", "read_only": "0 days", "refused": "0 days", "incident": "0 days"})
	if len(forged) != 0 {
		t.Fatalf("policyPeriods of periods of 0: %v", forged)
	}
	a.policies = []policyLeaf{{index: 0, periods: defaultPeriods()}, {index: 5, periods: forged}}
	id := strings.Repeat("cd", 32)
	leaf := map[string]string{"kind": "receipt", "row": id, "status": "authorized", "class": "money_moved", "recorded": recorded.Format(time.RFC3339Nano)}
	tomb := tombstone{class: "money_moved", status: "authorized",
		retainUntil: recorded.Add(time.Second).Format(time.RFC3339), sweptAt: recorded.Add(2 * time.Second).Format(time.RFC3339)}
	a.tombs = []sweptLeaf{{index: 6, leaf: leaf, tomb: tomb}}
	published, err := parseRetention("money_moved=18months")
	if err != nil {
		t.Fatal(err)
	}
	a.checkPolicies(published)
	a.checkTombstones(published, time.Now().UTC())
	if len(a.mismatches) == 0 {
		t.Fatalf("a money-moved row swept 2 s after it was recorded, under a policy leaf of 0 days, passes the audit:\n%s", out)
	}
}

// A policy leaf the ledger would not write is a finding when read: a
// period of 0, one that does not parse, a class without its line, a line
// a policy leaf does not have. The ledger's own policy leaf is none.
func TestAuditFindsAPolicyLeafTheLedgerDoesNotWrite(t *testing.T) {
	good := "kind policy\npolicy p-1\nat 2026-01-01T00:00:00Z\nmoney_moved 18 months\naccount_changed 12 months\nread_only 90 days\nrefused 12 months\nincident 12 months\ndispute 12 months\n"
	for _, tc := range []struct{ name, leaf, want string }{
		{"the ledger's", good, ""},
		{"without a dispute line", strings.Replace(good, "dispute 12 months\n", "", 1), ""},
		{"zero", strings.Replace(good, "money_moved 18 months", "money_moved 0 days", 1), "money_moved period \"0 days\" is not positive"},
		{"no period", strings.Replace(good, "read_only 90 days", "read_only soon", 1), "read_only line \"soon\" is no period"},
		{"missing", strings.Replace(good, "refused 12 months\n", "", 1), "no refused line"},
		{"extra", good + "money_moved_eu 1 days\n", "lines a policy leaf does not have (money_moved_eu)"},
		{"zero dispute", strings.Replace(good, "dispute 12 months", "dispute 0 months", 1), "dispute line \"0 months\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := testAuditor()
			if err := a.compare(3, []byte(leafVersion+"\n"+tc.leaf)); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(a.mismatches, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("mismatches:\n%s\nwant %q", got, tc.want)
			}
			if len(a.policies) != 1 || a.policies[0].periods["money_moved"] == (retention.Period{}) && tc.name != "zero" {
				t.Fatalf("policies: %+v", a.policies)
			}
		})
	}
}

// The auditor gives the business's published periods with --retention: a
// policy leaf logging a shorter one for a class is a finding, though the
// shortest logged period still bounds the check of each swept row; one
// logging a longer period is not.
func TestAuditFindsALoggedPeriodShorterThanThePublishedOne(t *testing.T) {
	published, err := parseRetention("money_moved=18months,read_only=90days")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		periods map[string]retention.Period
		finding bool
	}{
		{"published", defaultPeriods(), false},
		{"longer", map[string]retention.Period{"money_moved": {Months: 24}, "read_only": {Days: 120}}, false},
		{"shorter", map[string]retention.Period{"money_moved": {Months: 6}, "read_only": {Days: 90}}, true},
		{"shorter in days", map[string]retention.Period{"money_moved": {Months: 18}, "read_only": {Days: 89}}, true},
	} {
		a, _ := testAuditor()
		a.policies = []policyLeaf{{index: 4, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), periods: tc.periods}}
		a.checkPolicies(published)
		if got := len(a.mismatches) > 0; got != tc.finding {
			t.Fatalf("%s: mismatches %q, want a finding: %v", tc.name, a.mismatches, tc.finding)
		}
		if tc.finding && !strings.Contains(a.mismatches[0], "shorter than the") {
			t.Fatalf("%s: %s", tc.name, a.mismatches[0])
		}
	}
}

// An incident holds the receipts of its grant whose signature passed
// until its close plus the incident period (keepReasons, incidentHolds),
// whatever their own class says. A read-only row of the incident's grant,
// recorded 100 days ago (read_only keeps 90 days) and swept a minute ago,
// ten days after the incident closed, is a finding; so is one swept while
// the incident is open. A row swept before the incident opened, a row of
// another grant, and an unauthorized row (whose signature the leaf does
// not say passed) are not.
func TestAuditHoldsTheRowsOfAnIncidentsGrant(t *testing.T) {
	now := time.Now().UTC()
	grant := "sha256:" + strings.Repeat("9", 64)
	incRow := strings.Repeat("34", 32)
	recorded := now.AddDate(0, 0, -100).Truncate(time.Second)
	for _, tc := range []struct {
		name           string
		grant, status  string
		opened, closed time.Time // closed zero: open
		swept          time.Time
		finding        string
	}{
		{"closed ten days ago", grant, "authorized", now.AddDate(0, 0, -20), now.AddDate(0, 0, -10), now.Add(-time.Minute), "holds the receipts of its grant until its close"},
		{"open", grant, "duplicate", now.AddDate(0, 0, -20), time.Time{}, now.Add(-time.Minute), "has no closure in the audited tree"},
		{"swept before it opened", grant, "authorized", now.AddDate(0, 0, -5), time.Time{}, now.AddDate(0, 0, -8), ""},
		// The sweep's time and the incident's are two replicas' clocks,
		// each up to ledger.ClockTolerance off the reference: a sweep
		// dated 7 minutes after the incident may have run before it.
		{"swept by a clock 7 minutes ahead of the incident's", grant, "authorized", now.Add(-time.Hour - 7*time.Minute), time.Time{}, now.Add(-time.Hour), ""},
		{"swept 20 minutes after it opened", grant, "authorized", now.Add(-time.Hour - 20*time.Minute), time.Time{}, now.Add(-time.Hour), "has no closure in the audited tree"},
		{"swept past the close plus the period", grant, "authorized", now.AddDate(-2, 0, 0), now.AddDate(-1, 0, -2), now.Add(-time.Minute), ""},
		{"another grant", "sha256:" + strings.Repeat("8", 64), "authorized", now.AddDate(0, 0, -20), time.Time{}, now.Add(-time.Minute), ""},
		{"unauthorized", grant, "unauthorized", now.AddDate(0, 0, -20), time.Time{}, now.Add(-time.Minute), ""},
	} {
		a, out := testAuditor()
		a.policies = []policyLeaf{{index: 0, periods: defaultPeriods()}}
		held := strings.Repeat("12", 32)
		a.incidentLeaves[incRow] = incidentLeaf{index: 2, row: incRow, grant: grant, recorded: tc.opened}
		if !tc.closed.IsZero() {
			a.closedAt[incRow] = closure{index: 3, incident: "INC-1", at: tc.closed.Format(time.RFC3339Nano)}
		}
		leaf := map[string]string{"kind": "receipt", "row": held, "status": tc.status, "class": "read_only", "grant": tc.grant, "recorded": recorded.Format(time.RFC3339Nano)}
		tomb := tombstone{class: "read_only", status: tc.status,
			retainUntil: recorded.AddDate(0, 0, 90).Format(time.RFC3339), sweptAt: tc.swept.Format(time.RFC3339)}
		a.tombs = []sweptLeaf{{index: 1, leaf: leaf, tomb: tomb}}
		a.checkTombstones(nil, now)
		got := strings.Join(a.mismatches, "\n")
		if tc.finding == "" && got != "" || tc.finding != "" && !strings.Contains(got, tc.finding) {
			t.Fatalf("%s: mismatches:\n%s\nwant %q\n%s", tc.name, got, tc.finding, out)
		}
	}
}

// A row leaf read before the kept checkpoint keeps its grant for the
// check: a swept row checkRowsPresent looks up is held by its grant's
// incident as a compared one is.
func TestAuditHoldsARowLoggedBeforeTheKeptCheckpointByItsGrant(t *testing.T) {
	a, _ := testAuditor()
	now := time.Now().UTC()
	grant := "sha256:" + strings.Repeat("7", 64)
	a.policies = []policyLeaf{{index: 0, periods: defaultPeriods()}}
	a.incidentLeaves["inc"] = incidentLeaf{index: 2, row: "inc", grant: grant, recorded: now.AddDate(0, 0, -50)}
	recorded := now.AddDate(0, 0, -100)
	data := fmt.Sprintf("%s\nkind receipt\nrow r1\ngrant %s\nstatus authorized\nclass read_only\nrecorded %s\n", leafVersion, grant, recorded.Format(time.RFC3339Nano))
	if err := a.note(1, []byte(data)); err != nil {
		t.Fatal(err)
	}
	a.tombstones["r1"] = &tombstone{class: "read_only", status: "authorized", retainUntil: recorded.AddDate(0, 0, 90).Format(time.RFC3339), sweptAt: now.Add(-time.Hour).Format(time.RFC3339)}
	if err := a.checkRowsPresent(); err != nil {
		t.Fatal(err)
	}
	a.checkTombstones(nil, now)
	if got := strings.Join(a.mismatches, "\n"); !strings.Contains(got, "has no closure in the audited tree") {
		t.Fatalf("mismatches: %q", got)
	}
}

// A swept row is compared with its own grant's incidents only, however
// many incidents of other grants the log holds (a writer key can open
// one with each receipt out of scope): the incidents are indexed by
// grant once, each grant's in leaf order, and not sorted and hashed
// again for every swept row.
func TestAuditComparesASweptRowWithItsOwnGrantsIncidentsOnly(t *testing.T) {
	a, _ := testAuditor()
	rec := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5000 {
		row := fmt.Sprintf("%064x", i)
		a.incidentLeaves[row] = incidentLeaf{index: int64(10 + i), row: row, grant: fmt.Sprintf("sha256:%064x", i), recorded: rec}
	}
	grant := "sha256:" + strings.Repeat("9", 64)
	a.incidentLeaves["inc-b"] = incidentLeaf{index: 9000, row: "inc-b", grant: grant, recorded: rec}
	a.incidentLeaves["inc-a"] = incidentLeaf{index: 7, row: "inc-a", grant: grant, recorded: rec}
	swept := rec.AddDate(0, 0, 400)
	const n = 2000
	for i := range n {
		g := grant
		if i%2 == 1 {
			g = "sha256:" + strings.Repeat("8", 64) // a grant no incident holds
		}
		s := sweptLeaf{index: int64(20000 + i), leaf: map[string]string{"kind": "receipt", "row": fmt.Sprintf("r%d", i), "status": "authorized", "grant": g},
			tomb: tombstone{sweptAt: swept.Format(time.RFC3339)}}
		p := a.grantHeld(s, swept, nil)
		if g != grant {
			if len(p) != 0 {
				t.Fatalf("row %d of a grant no incident holds: %q", i, p)
			}
			continue
		}
		if len(p) != 2 || !strings.Contains(p[0], "incident row inc-a (leaf 7") || !strings.Contains(p[1], "incident row inc-b (leaf 9000") {
			t.Fatalf("row %d: %q, want its grant's two open incidents, in leaf order", i, p)
		}
	}
	if want := n / 2 * 2; a.heldVisits != want {
		t.Fatalf("%d swept rows were compared with %d incident leaves in all, want %d: each row with its own grant's incidents only", n, a.heldVisits, want)
	}
}
