package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// The log takes leaves in the order they commit, so a row's leaf records
// a time no earlier than the leaves before it, give or take eventSkew. A
// row inserted in the row store with its leaf queued behind the log's
// back, recorded a month ago, lands after leaves recorded since: a
// finding, though the row matches its leaf.
func TestAuditFindsARowRecordedBeforeTheLeavesBeforeIt(t *testing.T) {
	f := start(t)
	forged, back := strings.Repeat("e", 64), time.Now().Add(-30*24*time.Hour).UTC()
	kept, key := f.keptAuditWithARowRecordedAt(t, forged, back)
	want := "row " + forged + ") is recorded " + back.Format(time.RFC3339Nano) + ", more than 5m0s before leaf "
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !strings.Contains(out, want) || strings.Contains(out, "differs from the ledger") {
			t.Fatalf("audit (--all %v): exit %d, want %d with %q alone\n%s%s", all, code, exitCheckFailed, want, out, errs)
		}
	}
	// A person looked at the finding and kept a later checkpoint: the
	// audits from it check the order of the leaves since, and --all of
	// every leaf.
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-10"}))
	later := filepath.Join(t.TempDir(), "later.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", later); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-11"}))
	if code, out, errs := f.ctl(t, "auditor", auditArgs(later, key, false)...); code != 0 || strings.Contains(out, want) {
		t.Errorf("audit from the later checkpoint: exit %d, want 0 without %q\n%s%s", code, want, out, errs)
	}
	if code, out, errs := f.ctl(t, "auditor", auditArgs(later, key, true)...); code != exitCheckFailed || !strings.Contains(out, want) {
		t.Errorf("audit --all from the later checkpoint: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}

// A replica whose clock ran a day ahead recorded one row, which matches
// its leaf. The audit finds the rows after it out of order; a person
// looks at it and keeps a later checkpoint. The audits from it hold the
// leaves since against the kept checkpoint's last leaf on, not against
// the leaf dated ahead, and pass; --all finds it again and names both
// leaves.
func TestAuditFromACheckpointKeptAfterALeafDatedAheadPasses(t *testing.T) {
	f := start(t)
	kept, key := f.keptAuditWithARowRecordedAt(t, strings.Repeat("a", 64), time.Now().Add(24*time.Hour).UTC())
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "is dated ahead") {
		t.Fatalf("audit: exit %d, want %d naming a leaf dated ahead\n%s%s", code, exitCheckFailed, out, errs)
	}
	later := filepath.Join(t.TempDir(), "later.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", later); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-11"}))
	if code, out, errs := f.ctl(t, "auditor", auditArgs(later, key, false)...); code != 0 {
		t.Errorf("audit from the checkpoint kept after the leaf dated ahead: exit %d, want 0\n%s%s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "auditor", auditArgs(later, key, true)...); code != exitCheckFailed || !strings.Contains(out, "is dated ahead") {
		t.Errorf("audit --all: exit %d, want %d naming the leaf dated ahead\n%s%s", code, exitCheckFailed, out, errs)
	}
}

// keptAuditWithARowRecordedAt keeps a checkpoint (keptAudit), then
// inserts row id, a copy of a read-only receipt's row recorded at, with
// its leaf queued behind the log's back (queueBehind): a row and leaf
// that match, out of the log's commit order. It returns the kept
// checkpoint's file and the log's verifier key.
func (f *fixture) keptAuditWithARowRecordedAt(t *testing.T, id string, at time.Time) (kept, key string) {
	t.Helper()
	readOnly := f.append(t, pacttest.Spec{Target: "O-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	leaf, _ := leafOf(t, f.logged(t, readOnly))
	kept, _, key = f.keptAudit(t)
	var lines []string
	for _, ln := range strings.Split(leaf, "\n") {
		switch {
		case ln == "row "+readOnly:
			ln = "row " + id
		case strings.HasPrefix(ln, "recorded "):
			ln = "recorded " + at.Format(time.RFC3339Nano)
		}
		lines = append(lines, ln)
	}
	f.queueBehind(t, id, strings.Join(lines, "\n"),
		tamper.ForgeRow(readOnly, id), tamper.EditRow(id, func(r *ledger.Row) { r.RecordedAt = at }))
	return kept, key
}

// A dispute event is logged in the transaction that records it, as a row
// is: one inserted in the row store later, resolving the customer's
// dispute as authorized a month back, with its leaf queued behind the
// log's back, lands after leaves recorded since, and is a finding though
// the row matches its leaf.
func TestAuditFindsADisputeEventRecordedBeforeTheLeavesBeforeIt(t *testing.T) {
	f := start(t)
	kept, key, leaf, _ := f.keptAuditOfADispute(t)
	back := time.Now().Add(-30 * 24 * time.Hour).UTC()
	var lines []string
	for _, ln := range strings.Split(leaf, "\n") {
		switch {
		case ln == "event 0":
			ln = "event 1"
		case ln == "status open":
			ln = "status resolved_customer_authorized"
		case strings.HasPrefix(ln, "at "):
			ln = "at " + back.Format(time.RFC3339Nano)
		}
		lines = append(lines, ln)
	}
	f.queueBehind(t, "dispute/"+f.rowID+"/1", strings.Join(lines, "\n"), tamper.EditRow(f.rowID, func(r *ledger.Row) {
		e := r.DisputeEvents[0]
		e.At, e.Status = back, ledger.DisputeResolvedCustomerAuthorized
		r.DisputeEvents, r.Dispute = append(r.DisputeEvents, e), ledger.DisputeResolvedCustomerAuthorized
	}))
	want := "(dispute event 1 of row " + f.rowID + ") is recorded " + back.Format(time.RFC3339Nano) + ", more than 5m0s before leaf "
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, want) {
		t.Fatalf("audit: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}
