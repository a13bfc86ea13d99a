package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// An incident row is kept while its incident is open: removed thirteen
// months after it was recorded (past the incident period counted from
// the recording) while the log holds no closure of its incident, it is a
// finding.
func TestIntegrityFindsAnIncidentRowSweptWhileItsIncidentIsOpen(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
	ri.Limits = &ledger.Limits{AmountMax: "1"}
	row, _ := h.append(t, ri)
	if row.Status != ledger.Incident {
		t.Fatalf("status %v, want INCIDENT", row.Status)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(row.RecordedAt.AddDate(0, 13, 0))
	h.sweepEarly(t, row.ID)
	p := problems(integrity(t, h))
	if !strings.Contains(p, row.ID+": ") || !strings.Contains(p, "the log holds no closure of it") {
		t.Fatalf("findings:\n%s\nwant one on row %s, swept while its incident is open", p, row.ID)
	}
}

// An incident holds the receipts of its grant until its close plus the
// incident period, whatever their class: a read-only row of the grant
// removed ten days after the close (past its own 90 days) is a finding;
// a read-only row of another grant removed then is not.
func TestIntegrityHoldsTheRowsOfAnIncidentsGrant(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	readOnly := pacttest.Spec{Target: "T-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, GrantID: "grant-held"}
	held, _ := h.append(t, in(h.sc.Mint(readOnly)))
	other := readOnly
	other.Target, other.User, other.GrantID = "T-2", "acct-2", "grant-other"
	free, _ := h.append(t, in(h.sc.Mint(other)))
	ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`, GrantID: "grant-held"}))
	ri.Limits = &ledger.Limits{AmountMax: "1"}
	row, _ := h.append(t, ri)
	if row.Status != ledger.Incident {
		t.Fatalf("status %v, want INCIDENT", row.Status)
	}
	h.set(held.RecordedAt.AddDate(0, 0, 100))
	if _, err := h.l.CloseIncident(ctx, row.IncidentID, "looked into", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(held.RecordedAt.AddDate(0, 0, 110))
	h.sweepEarly(t, held.ID)
	h.sweepEarly(t, free.ID)
	p := problems(integrity(t, h))
	if !strings.Contains(p, held.ID+": ") || !strings.Contains(p, "holds the receipts of its grant until its close plus the incident period") {
		t.Fatalf("findings:\n%s\nwant one on row %s, held by its grant's incident", p, held.ID)
	}
	if strings.Contains(p, free.ID) {
		t.Fatalf("a row of another grant swept when due is a finding:\n%s", p)
	}
}

// A sweep that ran before an incident existed cannot have seen it: a
// replica sweeps a read-only row of grant G, and a little later another
// replica, whose clock is 7 minutes behind the sweeper's (each within
// ClockTolerance of the reference), records a receipt of G that opens an
// incident, its row recorded 7 minutes before the sweep by the two
// clocks. That is no finding. A row of another grant swept by the same
// sweep, whose incident was recorded 20 minutes before it (more than two
// clocks and a commit apart), is.
func TestIntegrityTakesASweepBeforeAnIncidentByAnotherClockAsBefore(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	readOnly := pacttest.Spec{Target: "T-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, GrantID: "grant-held"}
	held, _ := h.append(t, in(h.sc.Mint(readOnly)))
	other := readOnly
	other.Target, other.User, other.GrantID = "T-2", "acct-2", "grant-late"
	late, _ := h.append(t, in(h.sc.Mint(other)))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	sweepAt := held.RecordedAt.AddDate(0, 0, 100)
	h.set(sweepAt)
	res, err := h.l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swept) != 2 {
		t.Fatalf("setup: sweep %+v", res)
	}
	for _, c := range []struct {
		grant, target string
		before        time.Duration
	}{{"grant-late", "A-7002", 20 * time.Minute}, {"grant-held", "A-7001", 7 * time.Minute}} {
		h.set(sweepAt.Add(-c.before)) // another replica's clock, behind the sweeper's
		ri := in(h.sc.Mint(pacttest.Spec{Target: c.target, ArgsJSON: `{"order":"` + c.target + `","amount":10}`, GrantID: c.grant}))
		ri.Limits = &ledger.Limits{AmountMax: "1"}
		if row, _ := h.append(t, ri); row.Status != ledger.Incident {
			t.Fatalf("status %v, want INCIDENT", row.Status)
		}
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.set(sweepAt.Add(time.Minute))
	p := problems(integrity(t, h))
	if strings.Contains(p, held.ID) {
		t.Fatalf("a sweep made before the incident existed is a finding:\n%s", p)
	}
	if !strings.Contains(p, late.ID+": ") || !strings.Contains(p, "has no closure in the log") {
		t.Fatalf("findings:\n%s\nwant one on row %s, swept 20 minutes after its grant's incident was recorded", p, late.ID)
	}
}

// A policy leaf the ledger does not write (a period of 0) is a finding,
// and licenses no sweep: a money-moved row removed an hour after it was
// recorded is a finding against the ledger's own policy leaf.
func TestIntegrityFindsAPolicyLeafOfZeroDays(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	forged := ledger.LeafVersion + "\nkind policy\npolicy forged\nat " + h.clock().UTC().Format(time.RFC3339Nano) +
		"\nmoney_moved 0 days\naccount_changed 0 days\nread_only 0 days\nrefused 0 days\nincident 0 days\ndispute 0 days\n"
	if err := h.store.Update(ctx, func(tx ledger.Tx) error { return tx.QueueLeaf("policy/forged", []byte(forged)) }); err != nil {
		t.Fatal(err)
	}
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-9"})))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(row.RecordedAt.Add(time.Hour))
	h.sweepEarly(t, row.ID)
	p := problems(integrity(t, h))
	if !strings.Contains(p, "money_moved period \"0 days\" is not positive") || !strings.Contains(p, row.ID+": ") || !strings.Contains(p, "before its class keeps it (18 months") {
		t.Fatalf("findings:\n%s\nwant the policy leaf and row %s", p, row.ID)
	}
}
