package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// problems lists an integrity check's findings, one a line.
func problems(p *ledger.IntegrityPage) string {
	var out []string
	for _, f := range p.Findings {
		out = append(out, f.RowID+": "+f.Problem)
	}
	return strings.Join(out, "\n")
}

// An operator with the row store removes a row long before its class
// lets it go and leaves a tombstone, as a retention sweep would: reads
// answer "expired" and the row's leaf looks swept. The leaf's class and
// recording time say when the row could first have been swept: fsck
// finds the tombstone. A row the sweep removed when it was due is not a
// finding.
func TestIntegrityFindsATombstoneBeforeItsTime(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		tomb  func(r *ledger.Row, now time.Time) ledger.Tombstone
		wantD string
	}{
		{"swept now, due now", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now, SweptAt: now}
		}, "before its class keeps it"},
		{"swept in the future", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RetainUntil, SweptAt: r.RetainUntil}
		}, "after the time of this check"},
		{"another class", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: 3, RetainUntil: now, SweptAt: now}
		}, "the leaf says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.startLog(t)
			hidden, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1"})))
			due, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-2", User: "acct-2", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			// The read-only row is swept when due: not a finding.
			h.set(due.RetainUntil.Add(time.Hour))
			if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
				t.Fatalf("sweep: %+v, %v", res, err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("a row swept when due:\n%s", problems(got))
			}
			// The money-moved row (18 months) goes after 90 days.
			err := h.store.Update(ctx, func(tx ledger.Tx) error {
				r, err := tx.Row(hidden.ID)
				if err != nil {
					return err
				}
				_, err = ledger.SweepRow(tx, r, tc.tomb(r, h.clock()))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			got := integrity(t, h)
			p := problems(got)
			if !strings.Contains(p, hidden.ID+": ") || !strings.Contains(p, tc.wantD) {
				t.Fatalf("findings:\n%s\nwant one on row %s with %q", p, hidden.ID, tc.wantD)
			}
		})
	}
}

// startLog enables the log and logs the retention policy, as ledgerd
// does at every start.
func (h *harness) startLog(t *testing.T) {
	t.Helper()
	h.enableLog(t, 0)
	if _, err := h.l.LogPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// restart stops the ledger and starts it again with the read-only period
// set to days.
func (h *harness) restart(t *testing.T, readOnlyDays int) {
	t.Helper()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h.policy = retention.DefaultPolicy()
	h.policy.Periods[retention.ReadOnly] = retention.Period{Days: readOnlyDays}
	h.open(t)
	h.startLog(t)
}

// sweepEarly removes row id as whoever holds the row store could, with
// a tombstone dated now that says it was due now.
func (h *harness) sweepEarly(t *testing.T, id string) {
	t.Helper()
	err := h.store.Update(context.Background(), func(tx ledger.Tx) error {
		r, err := tx.Row(id)
		if err != nil {
			return err
		}
		now := h.clock()
		_, err = ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now, SweptAt: now})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An operator lengthens the read-only period from 90 to 180 days after
// the sweep let a read-only row go at 90: the row was swept as the
// policy logged before it said, and is no finding. The log now holds both
// policies, and a row recorded since is checked against the shorter
// (another replica may still run with it): removed at 60 days, it is a
// finding.
func TestIntegrityChecksATombstoneAgainstThePolicyItWasLoggedUnder(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	readOnly := pacttest.Spec{Target: "T-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}
	row, _ := h.append(t, in(h.sc.Mint(readOnly)))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(row.RetainUntil.Add(time.Hour))
	if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("a row swept when due:\n%s", problems(got))
	}

	h.restart(t, 180)
	later := readOnly
	later.Target, later.User, later.At = "T-2", "acct-2", h.clock()
	kept, _ := h.append(t, in(h.sc.Mint(later)))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("after the read-only period was lengthened:\n%s", problems(got))
	}
	h.drain(t)
	h.set(kept.RecordedAt.AddDate(0, 0, 60))
	h.sweepEarly(t, kept.ID)
	p := problems(integrity(t, h))
	if want := kept.ID + ": leaf "; !strings.Contains(p, want) || !strings.Contains(p, "before its class keeps it (90 days from ") || strings.Contains(p, row.ID) {
		t.Fatalf("findings:\n%s\nwant one on row %s only, against 90 days", p, kept.ID)
	}
}

// An operator shortens the read-only period from 90 to 30 days: a row
// recorded under 90 days and removed at 40 is a finding, checked against
// the period in force when it was logged; a row recorded under 30 days
// and swept when due is not. A row logged before any policy leaf (by an
// earlier version) has no period to be checked against.
func TestIntegrityChecksATombstoneAfterAPeriodWasShortened(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.enableLog(t, 0) // an earlier version: no policy leaf
	readOnly := pacttest.Spec{Target: "T-0", User: "acct-0", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}
	unchecked, _ := h.append(t, in(h.sc.Mint(readOnly)))
	if _, err := h.l.LogPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	readOnly.Target, readOnly.User = "T-1", "acct-1"
	early, _ := h.append(t, in(h.sc.Mint(readOnly)))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.restart(t, 30)
	readOnly.Target, readOnly.User, readOnly.At = "T-2", "acct-2", h.clock()
	due, _ := h.append(t, in(h.sc.Mint(readOnly)))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.set(due.RetainUntil.Add(time.Hour))
	if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 || res.Swept[0].RowID != due.ID {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("a row swept when due under the shorter period:\n%s", problems(got))
	}
	h.set(early.RecordedAt.AddDate(0, 0, 40))
	h.sweepEarly(t, early.ID)
	h.sweepEarly(t, unchecked.ID)
	p := problems(integrity(t, h))
	if want := early.ID + ": leaf "; !strings.Contains(p, want) || !strings.Contains(p, "before its class keeps it (90 days from ") {
		t.Fatalf("findings:\n%s\nwant one on row %s against 90 days", p, early.ID)
	}
	if strings.Contains(p, unchecked.ID) {
		t.Fatalf("a row logged before any policy leaf was checked against a period:\n%s", p)
	}
}

// An incident closed ten months after it opened keeps its row a year
// from the close: a tombstone of the row thirteen months after it was
// recorded (past the incident period from the recording, not from the
// close) is found; the sweep at its time is not.
func TestIntegrityFindsAnIncidentRowSweptBeforeItsClosePeriod(t *testing.T) {
	ctx := context.Background()
	for _, forge := range []bool{false, true} {
		h := newHarness(t)
		h.startLog(t)
		ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
		ri.Limits = &ledger.Limits{AmountMax: "1"}
		row, _ := h.append(t, ri)
		if row.Status != ledger.Incident {
			t.Fatalf("status %v, want INCIDENT", row.Status)
		}
		h.drain(t)
		h.set(row.RecordedAt.AddDate(0, 10, 0))
		inc, err := h.l.CloseIncident(ctx, row.IncidentID, "looked into", "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.l.Integrate(ctx); err != nil {
			t.Fatal(err)
		}
		h.drain(t)
		if !forge {
			h.set(inc.RetainUntil.Add(time.Hour))
			if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
				t.Fatalf("sweep: %+v, %v", res, err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("an incident row swept when due:\n%s", problems(got))
			}
			continue
		}
		h.set(row.RecordedAt.AddDate(0, 13, 0))
		err = h.store.Update(ctx, func(tx ledger.Tx) error {
			r, err := tx.Row(row.ID)
			if err != nil {
				return err
			}
			now := h.clock()
			_, err = ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now, SweptAt: now})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		p := problems(integrity(t, h))
		if want := "closes incident " + inc.ID + " of row " + row.ID; !strings.Contains(p, want) {
			t.Fatalf("findings:\n%s\nwant one with %q", p, want)
		}
	}
}

// Incidents live in the row store beside the rows: whoever holds it could
// hide one from the incident list, close one without its leaf, move a
// close earlier (the sweep then lets the platform's rows of that day go
// a year after the earlier date) or point one at another agent platform
// (the sweep then holds the wrong day). fsck compares every incident
// with its row and, once closed, with the leaf of its closure.
func TestIntegrityChecksIncidents(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		closed bool
		edit   func(id string) func(tx *bbolt.Tx) error
		want   string
	}{
		{"hide an open incident", false, tamper.DropIncident, "the row store holds no incident %s"},
		{"hide a closed incident", true, tamper.DropIncident, "the row store holds no incident %s"},
		{"close an incident without its leaf", false, func(id string) func(tx *bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) {
				inc.ClosedAt, inc.ClosedBy, inc.Note = time.Date(2026, 10, 8, 0, 0, 0, 0, time.UTC), "admin", "nothing wrong"
			})
		}, "the closure of incident %s has no leaf in the log"},
		{"move a close earlier", true, func(id string) func(tx *bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.ClosedAt = inc.ClosedAt.AddDate(0, -11, 0) })
		}, "differs from the closure of incident %s: at is"},
		{"reopen a closed incident", true, func(id string) func(tx *bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.ClosedAt, inc.ClosedBy, inc.Note = time.Time{}, "", "" })
		}, "incident %s is open, but leaf"},
		{"move an incident to another platform", false, func(id string) func(tx *bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.Agent = "elsewhere.example" })
		}, "incident %s names agent platform \"elsewhere.example\""},
		{"make up an incident", false, nil, "incident INC-2 names row %r, which is not its row"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
			ri.Limits = &ledger.Limits{AmountMax: "1"}
			row, _ := h.append(t, ri)
			if row.Status != ledger.Incident {
				t.Fatalf("status %v, want INCIDENT", row.Status)
			}
			other, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-7002", User: "acct-2"})))
			h.set(h.clock().Add(24 * time.Hour))
			if tc.closed {
				if _, err := h.l.CloseIncident(ctx, row.IncidentID, "looked into", "admin"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("clean ledger:\n%s", problems(got))
			}
			on := row.ID
			if tc.edit == nil {
				// An incident of the authorized row, which opened none.
				on = other.ID
				tc.edit = func(string) func(tx *bbolt.Tx) error {
					return tamper.PutIncident(ledger.IncidentRecord{ID: "INC-2", RowID: other.ID, Reason: "scopes_within_grant: made up", Agent: other.Agent.Platform, OpenedAt: other.RecordedAt})
				}
			}
			h.tamper(t, tc.edit(row.IncidentID))
			p := problems(integrity(t, h))
			want := strings.ReplaceAll(strings.ReplaceAll(tc.want, "%s", row.IncidentID), "%r", on)
			if !strings.Contains(p, on+": ") || !strings.Contains(p, want) {
				t.Fatalf("findings:\n%s\nwant one on row %s with %q", p, on, want)
			}
		})
	}
}

// A dispute event keeps its row the incident period past the event, and
// while its dispute is open. Whoever holds the row store could still
// remove a disputed row with a tombstone a sweep might have left at its
// class's end: fsck finds the tombstone before the dispute's hold ends,
// and the tombstone of a row whose last dispute event left it open; the
// sweep once the hold has ended is no finding.
func TestIntegrityFindsADisputedRowSweptEarly(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		resolve bool
		forgeAt func(row *ledger.Row, disputed time.Time) time.Time // zero: the sweep removes it when due
		want    string
	}{
		{name: "swept when due", resolve: true},
		{name: "removed at its class's end", resolve: true, forgeAt: func(row *ledger.Row, _ time.Time) time.Time { return row.RetainUntil.Add(time.Hour) },
			want: "which keeps the row until"},
		{name: "removed with its dispute open", forgeAt: func(_ *ledger.Row, disputed time.Time) time.Time { return disputed.AddDate(2, 0, 0) },
			want: "leaves its dispute open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.startLog(t)
			row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
			disputed := row.RetainUntil.Add(-30 * 24 * time.Hour)
			h.set(disputed)
			if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "chargeback", "support-key"); err != nil {
				t.Fatal(err)
			}
			if tc.resolve {
				if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeResolvedCustomerAuthorized, "covered", "support-key"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			if tc.forgeAt == nil {
				h.set(h.l.Policy().Periods[retention.Incident].After(disputed).Add(time.Hour))
				if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
					t.Fatalf("sweep: %+v, %v", res, err)
				}
				if got := integrity(t, h); len(got.Findings) != 0 {
					t.Fatalf("a disputed row swept when due:\n%s", problems(got))
				}
				return
			}
			h.set(tc.forgeAt(row, disputed))
			err := h.store.Update(ctx, func(tx ledger.Tx) error {
				r, err := tx.Row(row.ID)
				if err != nil {
					return err
				}
				now := h.clock()
				_, err = ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: row.RetainUntil, SweptAt: now})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if p := problems(integrity(t, h)); !strings.Contains(p, tc.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", p, tc.want)
			}
		})
	}
}
