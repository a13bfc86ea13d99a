package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
)

// leafOf is the leaf a proof file proves, and its index.
func leafOf(t *testing.T, file string) (string, int64) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proof.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b.Leaf, b.LeafIndex
}

// queueBehind stops ledgerd, applies edits to its bbolt file, queues leaf
// under ref as the ledger queues a row's leaf, and starts ledgerd again:
// what an operator who can write the row store, and holds no log signing
// key, can do. ledgerd's integrator logs no second leaf of a ref with a
// leaf index, so an edit that makes it forget the first
// (tamper.ForgetLeafIndex) has it log the leaf and sign it. It returns
// once the leaf's turn in the queue has come (a row posted after it is
// logged: the log takes leaves in the order they were queued).
func (f *fixture) queueBehind(t *testing.T, ref, leaf string, edits ...func(*bbolt.Tx) error) {
	t.Helper()
	f.queueBehindWith(t, ref, leaf, nil, edits...)
}

// queueBehindWith is queueBehind running also, when set, in the
// transaction that queues the leaf.
func (f *fixture) queueBehindWith(t *testing.T, ref, leaf string, also func(ledger.Tx) error, edits ...func(*bbolt.Tx) error) {
	t.Helper()
	f.stop()
	if err := tamper.Apply(filepath.Join(f.cfg.DataDir, "ledger.db"), edits...); err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(filepath.Join(f.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = store.Update(context.Background(), func(tx ledger.Tx) error {
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		return tx.QueueLeaf(ref, []byte(leaf))
	})
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-77", Target: "Q-77"}))
}

// A row is logged once. An operator who rewrites a logged row in the row
// store (here its class, money_moved to read_only, which would have it
// swept early) and queues a second leaf for it with the new values has the
// ledger's integrator sign that leaf, and the row then matches the newer
// leaf. The audit finds the row's two leaves: read from the tiles, and
// when the row's proof is of a leaf past the audited tree while the tree
// holds another leaf of the row.
func TestAuditFindsARowLoggedTwice(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	leaf, first := leafOf(t, f.logged(t, f.rowID))
	if !strings.Contains(leaf, "\nclass money_moved\n") {
		t.Fatalf("the row's leaf:\n%s", leaf)
	}
	c, wctx := f.writer(t)
	before, err := c.GetCheckpoint(wctx, &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f.queueBehind(t, f.rowID, strings.Replace(leaf, "\nclass money_moved\n", "\nclass read_only\n", 1),
		tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Class = retention.ReadOnly }), tamper.ForgetLeafIndex(f.rowID))
	_, second := leafOf(t, f.logged(t, f.rowID))
	if second == first {
		t.Fatalf("the row's proof is still of leaf %d", first)
	}
	want := "row " + f.rowID + " has two leaves, " + itoa(first) + " and " + itoa(second) + ": a row is logged once"
	// fsck, inside the ledger, finds the first leaf that its row's index
	// no longer points to.
	if code, out, errs := f.ctl(t, "auditor", "fsck"); code == 0 || !strings.Contains(out, "leaf "+itoa(first)) {
		t.Errorf("fsck: exit %d, want a finding on leaf %d\n%s%s", code, first, out, errs)
	}
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Fatalf("audit (--all %v): exit %d, want %d with %q\n%s%s", all, code, exitCheckFailed, want, out, errs)
		}
	}

	// The audited tree holds the row's first leaf only; the server proves
	// the row under a later checkpoint, at its second leaf.
	s := f.split(t)
	s.checkpoint = func(context.Context) (*ledgerv1.GetCheckpointResponse, error) { return before, nil }
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, want) {
		t.Fatalf("audit of a tree holding the first leaf only: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}

// A row compared with its leaf as read from the tiles (one logged since
// the kept checkpoint, or any with --all) is asked for its proof too: a
// second leaf of it logged after the audited tree, its row left as it
// was, is a finding, as the row's proof names that leaf.
func TestAuditFindsARowComparedFromTheTilesLoggedAgainAfterTheAuditedTree(t *testing.T) {
	f := start(t)
	kept, later, key := f.keptAudit(t)
	leaf, first := leafOf(t, f.logged(t, later))
	if !strings.Contains(leaf, "\nclass money_moved\n") {
		t.Fatalf("the row's leaf:\n%s", leaf)
	}
	c, wctx := f.writer(t)
	before, err := c.GetCheckpoint(wctx, &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f.queueBehind(t, later, strings.Replace(leaf, "\nclass money_moved\n", "\nclass read_only\n", 1), tamper.ForgetLeafIndex(later))
	_, second := leafOf(t, f.logged(t, later))
	if second == first {
		t.Fatalf("the row's proof is still of leaf %d", first)
	}
	want := "row " + later + " has two leaves, " + itoa(first) + " and " + itoa(second) + ": a row is logged once"
	f.auditAgainstFinds(t, kept, key, before, want)
}

// The server's answer for a row compared with its leaf as read from the
// tiles must be that leaf, as for an event the audited tree holds.
func TestAuditFindsARowInTheTreeTheServerHasNoLeafFor(t *testing.T) {
	f := start(t)
	kept, later, key := f.keptAudit(t)
	_, first := leafOf(t, f.logged(t, later))
	f.edit(t, tamper.ForgetLeafIndex(later))
	want := "row " + later + ": the audited tree holds its leaf " + itoa(first) + ", but the server says "
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want+"it has no leaf in the log") {
		t.Fatalf("audit of a row whose leaf index was removed: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}

	s := f.split(t)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		if r.GetId() == later && r.GetEvent() == "" {
			return nil, status.Error(codes.Unavailable, errNotLogged.Error()+": "+later)
		}
		return s.c.GetRowProof(ctx, r)
	}
	code, out, errs = f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want+"the row is not yet logged") {
		t.Fatalf("audit of a row whose leaf the server says is not yet logged: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}

// Without an API key the audit reads the leaves before the kept
// checkpoint too (the tiles are public): a row logged before it with a
// second leaf since is a finding, the rows themselves not compared.
func TestAuditWithoutAKeyFindsARowLoggedTwiceAcrossTheKeptCheckpoint(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	leaf, first := leafOf(t, f.logged(t, f.rowID))
	f.queueBehind(t, f.rowID, strings.Replace(leaf, "\nclass money_moved\n", "\nclass read_only\n", 1),
		tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Class = retention.ReadOnly }), tamper.ForgetLeafIndex(f.rowID))
	_, second := leafOf(t, f.logged(t, f.rowID))
	want := "row " + f.rowID + " has two leaves, " + itoa(first) + " and " + itoa(second) + ": a row is logged once"
	code, out, errs := f.ctl(t, "nobody", "log", "audit", "--from", kept, "--log-key", key)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) || !strings.Contains(out, "rows not compared: no API key") {
		t.Fatalf("audit without a key: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}

// A dispute event is logged once, as a row is: an event rewritten in the
// row store with a second leaf queued for it is a finding.
func TestAuditFindsADisputeEventLoggedTwice(t *testing.T) {
	f := start(t)
	kept, key, leaf, first := f.keptAuditOfADispute(t)
	if !strings.Contains(leaf, "\nstatus open\n") {
		t.Fatalf("the event's leaf:\n%s", leaf)
	}
	// The row store and a second leaf say the dispute was resolved as
	// authorized by the customer.
	f.queueBehind(t, "dispute/"+f.rowID+"/0", strings.Replace(leaf, "\nstatus open\n", "\nstatus resolved_customer_authorized\n", 1),
		tamper.EditRow(f.rowID, func(r *ledger.Row) {
			r.Dispute, r.DisputeEvents[0].Status = ledger.DisputeResolvedCustomerAuthorized, ledger.DisputeResolvedCustomerAuthorized
		}), tamper.ForgetLeafIndex("dispute/"+f.rowID+"/0"))
	want := "dispute event 0 of row " + f.rowID + " has two leaves, " + itoa(first) + " and "
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !strings.Contains(out, want) || !strings.Contains(out, "an event is logged once") {
			t.Fatalf("audit (--all %v): exit %d, want %d with %q\n%s%s", all, code, exitCheckFailed, want, out, errs)
		}
	}
}

// A second leaf of a dispute event logged after the audited tree, which
// holds the event's first leaf, is a finding too: the event's proof then
// names the second leaf, so a customer asking for it is shown values the
// ledger never recorded, while the row store still matches the first.
func TestAuditFindsADisputeEventLoggedAgainAfterTheAuditedTree(t *testing.T) {
	f := start(t)
	kept, key, leaf, first := f.keptAuditOfADispute(t)
	c, wctx := f.writer(t)
	before, err := c.GetCheckpoint(wctx, &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ref := "dispute/" + f.rowID + "/0"
	f.queueBehind(t, ref, strings.Replace(leaf, "\nstatus open\n", "\nstatus resolved_customer_authorized\n", 1), tamper.ForgetLeafIndex(ref))
	file := filepath.Join(t.TempDir(), "event.proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--out", file, "--wait", "20s"); code != 0 {
		t.Fatalf("proof of the event: %s", errs)
	}
	_, second := leafOf(t, file)
	if second == first {
		t.Fatalf("the event's proof is still of leaf %d", first)
	}
	want := "dispute event 0 of row " + f.rowID + " has two leaves, " + itoa(first) + " and " + itoa(second) + ": an event is logged once"

	// The audited tree holds the event's first leaf only; the server
	// proves the event under a later checkpoint, at its second leaf.
	f.auditAgainstFinds(t, kept, key, before, want)
}

// The server's answer for an event whose leaf the audited tree holds
// must be that leaf: "no leaf, none queued" means the row store's record
// of it was removed, and "not yet logged" that a second leaf is queued.
func TestAuditFindsAnEventInTheTreeTheServerHasNoLeafFor(t *testing.T) {
	f := start(t)
	kept, key, _, first := f.keptAuditOfADispute(t)
	ref := "dispute/" + f.rowID + "/0"
	f.edit(t, tamper.ForgetLeafIndex(ref))
	want := "dispute event 0 of row " + f.rowID + " (open, at "
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) || !strings.Contains(out, "the audited tree holds its leaf "+itoa(first)+", but the server says it has no leaf in the log") {
		t.Fatalf("audit of an event whose leaf index was removed: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}

	s := f.split(t)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		if r.GetEvent() != "" {
			return nil, status.Error(codes.Unavailable, errNotLogged.Error()+": "+r.GetEvent())
		}
		return s.c.GetRowProof(ctx, r)
	}
	code, out, errs = f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) || !strings.Contains(out, "the audited tree holds its leaf "+itoa(first)+", but the server says the event is not yet logged") {
		t.Fatalf("audit of an event whose leaf the server says is not yet logged: exit %d, want %d with %q\n%s%s", code, exitCheckFailed, want, out, errs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// keptAuditOfADispute opens a dispute on the fixture's row, keeps a
// checkpoint (keptAudit) and returns it with the log's verifier key, and
// the leaf of the dispute's event 0 with its index.
func (f *fixture) keptAuditOfADispute(t *testing.T) (kept, key, leaf string, index int64) {
	t.Helper()
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "never asked"); code != 0 {
		t.Fatalf("dispute: %s", errs)
	}
	kept, _, key = f.keptAudit(t)
	file := filepath.Join(t.TempDir(), "event.proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--out", file, "--wait", "20s"); code != 0 {
		t.Fatalf("proof of the event: %s", errs)
	}
	leaf, index = leafOf(t, file)
	return kept, key, leaf, index
}

// An incident's closure logged, a checkpoint kept and audited, then a
// second closure leaf queued behind the ledger's back with another note:
// the audited tree holds the first leaf only, and the server proves the
// closure at the second. The audit asks for the closure's proof even
// though it compared the first leaf as read, and finds the two.
func TestAuditFindsAnIncidentClosedAgainAfterTheAuditedTree(t *testing.T) {
	f := start(t)
	row, id := f.incidentRow(t)
	f.logged(t, row)
	f.closeLogged(t, row, id)
	kept, _, key := f.keptAudit(t)
	file := filepath.Join(t.TempDir(), "close.proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", row, "--event", "incident-close", "--out", file); code != 0 {
		t.Fatalf("proof of the closure: %s", errs)
	}
	leaf, first := leafOf(t, file)
	c, wctx := f.writer(t)
	before, err := c.GetCheckpoint(wctx, &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ln := range strings.Split(leaf, "\n") {
		if strings.HasPrefix(ln, "note ") {
			ln = "note " + strings.Repeat("0", 64)
		}
		lines = append(lines, ln)
	}
	ref := "incident/" + id + "/close"
	f.queueBehind(t, ref, strings.Join(lines, "\n"), tamper.ForgetLeafIndex(ref))
	if code, _, errs := f.ctl(t, "auditor", "proof", row, "--event", "incident-close", "--out", file, "--wait", "20s"); code != 0 {
		t.Fatalf("proof of the closure: %s", errs)
	}
	_, second := leafOf(t, file)
	if second == first {
		t.Fatalf("the closure's proof is still of leaf %d", first)
	}
	want := "the closure of incident " + id + " has two leaves, " + itoa(first) + " and " + itoa(second) + ": an incident is closed once"
	f.auditAgainstFinds(t, kept, key, before, want)
}

// auditAgainstFinds runs the audit from kept, with and without --all,
// against a server whose latest checkpoint is before (the audited tree
// holds a ref's first leaf only, while the server proves it at a second),
// and fails t unless each run finds want.
func (f *fixture) auditAgainstFinds(t *testing.T, kept, key string, before *ledgerv1.GetCheckpointResponse, want string) {
	t.Helper()
	s := f.split(t)
	s.checkpoint = func(context.Context) (*ledgerv1.GetCheckpointResponse, error) { return before, nil }
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) {
			t.Fatalf("audit (--all %v) of a tree holding the first leaf only: exit %d, want %d with %q\n%s%s", all, code, exitCheckFailed, want, out, errs)
		}
	}
}

// A dispute leaf's event number is read one way by every check: a second
// leaf of event 0 written "event 00" (a number the ledger never writes)
// is a finding of the audit with a key and without one, as the second
// leaf of event 0 and as a number not written as the ledger writes it.
func TestAuditFindsADisputeEventLoggedAgainUnderAnotherSpelling(t *testing.T) {
	f := start(t)
	kept, key, leaf, first := f.keptAuditOfADispute(t)
	ref := "dispute/" + f.rowID + "/0"
	f.queueBehind(t, ref, strings.Replace(strings.Replace(leaf, "\nstatus open\n", "\nstatus resolved_customer_authorized\n", 1), "\nevent 0\n", "\nevent 00\n", 1), tamper.ForgetLeafIndex(ref))
	want := []string{"dispute event 0 of row " + f.rowID + " has two leaves, " + itoa(first) + " and ", `its event line "00" is not a number as the ledger writes it`}
	for _, role := range []string{"nobody", "auditor"} {
		for _, all := range []bool{false, true} {
			code, out, errs := f.ctl(t, role, auditArgs(kept, key, all)...)
			for _, w := range want {
				if code != exitCheckFailed || !strings.Contains(out, w) {
					t.Fatalf("audit (%s, --all %v): exit %d, want %d with %q\n%s%s", role, all, code, exitCheckFailed, w, out, errs)
				}
			}
		}
	}
}

// A leaf whose first line is not the version line the ledger writes is
// read by no check: each audit reports it, with a key and without one.
func TestAuditFindsALeafOfAnUnknownVersion(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	f.queueBehind(t, "x/"+f.rowID, "pactledger leaf v0\nkind receipt\nrow "+f.rowID+"\nclass read_only\n")
	want := `does not start with the line "pactledger leaf v1"`
	for _, role := range []string{"nobody", "auditor"} {
		for _, all := range []bool{false, true} {
			code, out, errs := f.ctl(t, role, auditArgs(kept, key, all)...)
			if code != exitCheckFailed || !strings.Contains(out, want) {
				t.Fatalf("audit (%s, --all %v): exit %d, want %d with %q\n%s%s", role, all, code, exitCheckFailed, want, out, errs)
			}
		}
	}
}

// One signed leaf must say one thing. A row inserted in the row store,
// with its leaf queued behind the log's back saying "status refused" and
// "class money_moved" before the row's own status and class lines: read
// last-wins, the leaf matches the row, while a customer or another tool
// reading it top down reads a refusal of money moved. proof verify
// refuses it and the audit finds it, with and without --all; a row's leaf
// with a line the ledger does not write in one is found too.
func TestALeafWithARepeatedOrUnknownLineIsRefused(t *testing.T) {
	f := start(t)
	readOnly := f.append(t, pacttest.Spec{Target: "O-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	leaf, _ := leafOf(t, f.logged(t, readOnly))
	kept, _, key := f.keptAudit(t)
	forged := func(id string, extra ...string) string {
		var lines []string
		for _, ln := range strings.Split(leaf, "\n") {
			if ln == "row "+readOnly {
				lines = append(lines, append([]string{"row " + id}, extra...)...)
				continue
			}
			lines = append(lines, ln)
		}
		return strings.Join(lines, "\n")
	}
	twice, unknown := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	f.queueBehind(t, twice, forged(twice, "status refused", "class money_moved"), tamper.ForgeRow(readOnly, twice))
	f.queueBehind(t, unknown, forged(unknown, "verdict refused"), tamper.ForgeRow(readOnly, unknown))

	file := f.served(t, twice)
	if got, _ := leafOf(t, file); strings.Count(got, "\nstatus ") != 2 {
		t.Fatalf("setup: the logged leaf is not the one with two status lines:\n%s", got)
	}
	if code, out, errs := offline("proof", "verify", file, "--log-key", key); code != exitCheckFailed || !strings.Contains(out, `two "status" lines`) {
		t.Errorf("proof verify of a row's leaf with two status lines (refused, then authorized): exit %d, want %d naming the repeated line:\n%s%s", code, exitCheckFailed, out, errs)
	}
	if code, out, errs := offline("proof", "verify", f.served(t, unknown), "--log-key", key); code != exitCheckFailed || !strings.Contains(out, "verdict") {
		t.Errorf("proof verify of a row's leaf with a verdict line: exit %d, want %d naming the line:\n%s%s", code, exitCheckFailed, out, errs)
	}
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if code != exitCheckFailed || !strings.Contains(out, `is not a leaf the ledger writes: the leaf has two "status" lines`) ||
			!strings.Contains(out, "the leaf has lines the ledger does not write in a receipt leaf (verdict)") {
			t.Errorf("log audit (--all %v) of a log holding a leaf with repeated status and class lines, and one with a verdict line: exit %d\n%s%s", all, code, out, errs)
		}
	}
}
