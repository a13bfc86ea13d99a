package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// incidentRow revokes the scenario's grant and posts a receipt under it:
// the row opens an incident. It returns the row's id and the incident's.
func (f *fixture) incidentRow(t *testing.T) (string, string) {
	t.Helper()
	if code, _, errs := f.ctl(t, "writer", "revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:00:00Z"); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	rep := f.appendReply(t, f.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-7777"}))
	if rep.GetRow().GetIncidentId() == "" {
		t.Fatalf("append: no incident: %v", rep.GetRow())
	}
	return rep.GetRow().GetId(), rep.GetRow().GetIncidentId()
}

// closeLogged closes incident id of row and waits until its closure is
// in a signed checkpoint.
func (f *fixture) closeLogged(t *testing.T, row, id string) {
	t.Helper()
	if code, out, errs := f.ctl(t, "admin", "incidents", "close", id, "--note", "customer re-granted"); code != 0 {
		t.Fatalf("close: %d %s %s", code, out, errs)
	}
	if code, _, errs := f.ctl(t, "auditor", "proof", row, "--event", "incident-close", "--out", filepath.Join(t.TempDir(), "close.proof"), "--wait", "20s"); code != 0 {
		t.Fatalf("the closure of %s was not logged: %d %s", id, code, errs)
	}
}

// An operator holding the row store edits an incident behind the log's
// back: deletes an open one (it leaves the incident list), points it at
// another row, closes it with no closure in the log, reopens one whose
// closure is logged or moves its close. Each incident row's leaf says
// status incident, and the row names its incident: the audit asks the
// server for it and compares it with the row and with the closure's
// leaf, whether the leaves are read from the tiles (--all) or the rows
// checked through their proofs (since a kept checkpoint).
func TestAuditFindsAnIncidentEditedBehindTheLog(t *testing.T) {
	tests := []struct {
		name   string
		closed bool // closed (and the closure logged) before the edit
		edit   func(f *fixture, row, id string) func(*bbolt.Tx) error
		want   string
	}{
		{"drop an open incident", false, func(_ *fixture, _, id string) func(*bbolt.Tx) error { return tamper.DropIncident(id) },
			"the ledger does not hold incident %i"},
		{"point it at another row", false, func(f *fixture, _, id string) func(*bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.RowID = f.rowID })
		}, "incident %i names row "},
		{"close it with no closure logged", false, func(_ *fixture, _, id string) func(*bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.ClosedAt, inc.ClosedBy = time.Now().UTC(), "admin" })
		}, "the log has no leaf of its closure"},
		{"reopen a closed incident", true, func(_ *fixture, _, id string) func(*bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.ClosedAt, inc.ClosedBy, inc.Note = time.Time{}, "", "" })
		}, "the incident is open, the leaf records its closure"},
		{"move the close earlier", true, func(_ *fixture, _, id string) func(*bbolt.Tx) error {
			return tamper.EditIncident(id, func(inc *ledger.IncidentRecord) { inc.ClosedAt = inc.ClosedAt.AddDate(0, -6, 0) })
		}, `at is "`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			row, id := f.incidentRow(t)
			f.logged(t, row)
			if tc.closed {
				f.closeLogged(t, row, id)
			}
			kept := filepath.Join(t.TempDir(), "kept.checkpoint")
			if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
				t.Fatalf("checkpoint: %s", errs)
			}
			f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"}))
			key := f.verifierKey(t)
			for _, all := range []bool{false, true} {
				args := []string{"log", "audit", "--from", kept, "--log-key", key, "--settle", "500ms"}
				if all {
					args = append(args, "--all")
				}
				if code, out, errs := f.ctl(t, "auditor", args...); code != 0 {
					t.Fatalf("audit %v before the edit: %d %s %s", args, code, out, errs)
				}
			}

			f.edit(t, tc.edit(f, row, id))
			want := strings.ReplaceAll(tc.want, "%i", id)
			for _, all := range []bool{false, true} {
				args := []string{"log", "audit", "--from", kept, "--log-key", key, "--settle", "500ms"}
				if all {
					args = append(args, "--all")
				}
				code, out, errs := f.ctl(t, "auditor", args...)
				if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, want) {
					t.Fatalf("audit %v after the edit: %d\n%s%s\nwant %q", args[6:], code, out, errs, want)
				}
			}
		})
	}
}
