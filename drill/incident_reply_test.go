package drill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// An incident's reply names what the row's recorded checks found, in
// plain words, and claims nothing they do not show: a look-up under a
// grant revoked before it did not go beyond what was granted.
func TestIncidentReplyNamesItsCause(t *testing.T) {
	names := func(e *env) drill.Names {
		return drill.Names{Brands: map[string]drill.BrandNames{e.sc.Brand.ID: {
			Name:   "Acme Outfitters",
			Scopes: map[string]string{"orders:read": "See your orders", "orders:cancel": "Cancel an order", "orders:refund": "Refund an order"},
		}}}
	}
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	tests := []struct {
		name string
		// post records the row the drill is run on.
		post      func(t *testing.T, e *env) *ledger.Row
		want      []string // in the reply
		notWant   []string // never in the reply
		detail    []string // in the decision pull's detail
		notDetail []string
	}{{
		name: "grant revoked before a look-up",
		post: func(t *testing.T, e *env) *ledger.Row {
			if _, err := e.l.RevokeGrant(context.Background(), "a2agrant_7Q2F", at.Add(-time.Minute), "customer asked", "support", false); err != nil {
				t.Fatal(err)
			}
			return e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
		},
		want:      []string{"after the permission you gave had been revoked", "7 October 2026 13:11 UTC"},
		notWant:   []string{"beyond what was granted", "not the action that was signed", "had not granted", "limit"},
		detail:    []string{"flips", "grant_not_revoked"},
		notDetail: []string{"scopes_within_grant", "args_hash", "within_limits"},
	}, {
		name: "scope beyond the grant",
		post: func(t *testing.T, e *env) *ledger.Row {
			return e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", Granted: "orders:read", ScopesUsed: []string{"orders:cancel"}}))
		},
		want:    []string{"a permission you had not granted (cancel an order)"},
		notWant: []string{"revoked", "not the action that was signed", "limit"},
		detail:  []string{"flips", "scopes_within_grant"},
	}, {
		name: "count limit exceeded",
		post: func(t *testing.T, e *env) *ledger.Row {
			e.appendWith(t, e.sc.Mint(pacttest.Spec{Target: "A-5530", At: at.Add(-time.Minute)}), &ledger.Limits{CountMax: 1})
			return e.appendWith(t, e.sc.Mint(pacttest.Spec{Target: "A-5531"}), &ledger.Limits{CountMax: 1})
		},
		want:    []string{"more times than the limit set for it allows (at most 1)"},
		notWant: []string{"revoked", "not the action that was signed", "had not granted", "beyond what was granted"},
		detail:  []string{"flips", "within_limits"},
	}, {
		name: "amount over the limit",
		post: func(t *testing.T, e *env) *ledger.Row {
			return e.appendWith(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", Tool: "refund_order", ScopesUsed: []string{"orders:refund"}, Granted: "orders:refund",
				ArgsJSON: `{"order":"A-5531","amount":120}`}), &ledger.Limits{AmountMax: "100"})
		},
		want:    []string{"an amount over the limit set for it (at most 100)"},
		notWant: []string{"revoked", "not the action that was signed", "had not granted", "more times"},
		detail:  []string{"flips", "within_limits"},
	}, {
		name: "args that are not the signed ones",
		post: func(t *testing.T, e *env) *ledger.Row {
			r := e.sc.Mint(pacttest.Spec{Target: "A-5531"})
			r.Actions[0].ArgsJSON = `{"order":"A-5531","refund":"all"}`
			return e.append(t, r)
		},
		want:    []string{"the action our log shows ran is not the action that was signed"},
		notWant: []string{"revoked", "had not granted", "limit", "beyond what was granted"},
		detail:  []string{"flips", "args_hash"},
	}, {
		name: "scope beyond a grant revoked before it",
		post: func(t *testing.T, e *env) *ledger.Row {
			if _, err := e.l.RevokeGrant(context.Background(), "a2agrant_7Q2F", at.Add(-time.Minute), "", "support", false); err != nil {
				t.Fatal(err)
			}
			return e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", Granted: "orders:read", ScopesUsed: []string{"orders:cancel"}}))
		},
		want:    []string{"a permission you had not granted (cancel an order), and it was taken after the permission you gave had been revoked"},
		notWant: []string{"not the action that was signed", "limit"},
		detail:  []string{"scopes_within_grant", "grant_not_revoked"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, time.Now)
			row := tc.post(t, e)
			if row.Status != ledger.Incident {
				t.Fatalf("row recorded %v: %+v", row.Status, row.Verifier.Checks)
			}
			e.r = drill.New(e.l, drill.Config{Names: names(e)})
			rep, err := e.r.Run(context.Background(), drill.Request{RowID: row.ID}, "lead")
			if err != nil {
				t.Fatal(err)
			}
			d := pulls(rep)[drill.PullDecision]
			if !d.Passed {
				t.Fatalf("decision: %+v", d)
			}
			for _, w := range append(tc.want, row.IncidentID) {
				if !strings.Contains(rep.Reply, w) {
					t.Errorf("reply lacks %q:\n%s", w, rep.Reply)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(rep.Reply, w) {
					t.Errorf("reply says %q:\n%s", w, rep.Reply)
				}
			}
			for _, w := range tc.detail {
				if !strings.Contains(d.Detail, w) {
					t.Errorf("decision lacks %q: %s", w, d.Detail)
				}
			}
			for _, w := range tc.notDetail {
				if strings.Contains(d.Detail, w) {
					t.Errorf("decision says %q: %s", w, d.Detail)
				}
			}
		})
	}
}

// The reply says what became of the row's incident: open, or opened and
// closed and when; a closed incident is not said to be opened as if new.
// The closing note is the business's own record: the decision quotes it
// for the support lead, the reply to the customer does not.
func TestIncidentReplySaysWhetherTheIncidentIsClosed(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	r := e.sc.Mint(pacttest.Spec{Target: "A-5531"})
	r.Actions[0].ArgsJSON = `{"order":"A-5531","refund":"all"}`
	row := e.append(t, r)
	if row.Status != ledger.Incident {
		t.Fatalf("row %v", row.Status)
	}

	rep, err := e.r.Run(ctx, drill.Request{RowID: row.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := pulls(rep)[drill.PullDecision]; !d.Passed || !strings.Contains(d.Detail, row.IncidentID+", open") {
		t.Errorf("open incident, decision: %+v", d)
	}
	if !strings.Contains(rep.Reply, "we have opened an incident ("+row.IncidentID+") and will put it right") || strings.Contains(rep.Reply, "closed") {
		t.Errorf("open incident, reply:\n%s", rep.Reply)
	}

	inc, err := e.l.CloseIncident(ctx, row.IncidentID, "refunded the order; agent platform told", "ops")
	if err != nil {
		t.Fatal(err)
	}
	rep, err = e.r.Run(ctx, drill.Request{RowID: row.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := pulls(rep)[drill.PullDecision]
	for _, want := range []string{row.IncidentID, "closed " + inc.ClosedAt.UTC().Format("2 January 2006 15:04 UTC") + " by ops", "refunded the order; agent platform told"} {
		if !d.Passed || !strings.Contains(d.Detail, want) {
			t.Errorf("closed incident, decision lacks %q: %+v", want, d)
		}
	}
	for _, want := range []string{"we opened an incident (" + row.IncidentID + ")", "closed it on " + inc.ClosedAt.UTC().Format("2 January 2006 15:04 UTC")} {
		if !strings.Contains(rep.Reply, want) {
			t.Errorf("closed incident, reply lacks %q:\n%s", want, rep.Reply)
		}
	}
	for _, not := range []string{"we have opened", "refunded the order", "ops"} {
		if strings.Contains(rep.Reply, not) {
			t.Errorf("closed incident, reply says %q:\n%s", not, rep.Reply)
		}
	}
}

// A look-up recorded INCIDENT (here under a grant revoked before it) is
// not a read-only turn: the incident class keeps its evidence, under
// legal hold, so the monthly drill may sample it and a dispute drill
// scores it. A look-up recorded in the read-only class keeps no evidence
// and is listed, never scored or sampled.
func TestIncidentLookupIsDrilledNotListed(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	if _, err := e.l.RevokeGrant(ctx, "a2agrant_7Q2F", at.Add(-time.Minute), "", "support", false); err != nil {
		t.Fatal(err)
	}
	inc := e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	look := e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531", GrantID: "a2agrant_8M0A", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at.Add(time.Minute)}))
	if inc.Status != ledger.Incident || inc.EvidenceNotKept != "" || look.Status != ledger.Authorized || look.EvidenceNotKept == "" {
		t.Fatalf("rows recorded %v (%q) and %v (%q)", inc.Status, inc.EvidenceNotKept, look.Status, look.EvidenceNotKept)
	}

	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0] != inc.ID || rep.ChecksTotal != 6 || len(rep.Listed) != 1 || rep.Listed[0].RowID != look.ID {
		t.Fatalf("dispute drill: rows %v, %d checks, listed %+v", rep.Rows, rep.ChecksTotal, rep.Listed)
	}
	if !strings.Contains(rep.Reply, "revoked") || !strings.Contains(rep.Reply, "one other request that ran no action") {
		t.Errorf("dispute drill reply:\n%s", rep.Reply)
	}

	rep, err = e.r.Run(ctx, drill.Request{Monthly: true, Sample: 5}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0] != inc.ID || !strings.Contains(rep.Note, "1 eligible row") {
		t.Fatalf("monthly drill: rows %v, note %q", rep.Rows, rep.Note)
	}
}
