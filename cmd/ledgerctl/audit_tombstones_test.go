package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
)

// sweepBehind stops ledgerd, removes row id from its row store with the
// tombstone tomb makes, as whoever holds the file could, and starts
// ledgerd again.
func (f *fixture) sweepBehind(t *testing.T, id string, tomb func(r *ledger.Row, now time.Time) ledger.Tombstone) {
	t.Helper()
	f.stop()
	store, err := bolt.Open(filepath.Join(f.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = store.Update(context.Background(), func(tx ledger.Tx) error {
		r, err := tx.Row(id)
		if err != nil {
			return err
		}
		_, err = ledger.SweepRow(tx, r, tomb(r, time.Now().UTC()))
		return err
	})
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t)
}

// An operator holding the row store removes a money-moved row the day it
// was recorded and leaves a tombstone, as a retention sweep would: the
// server answers ROW_EXPIRED and the audit counted the leaf as swept.
// The audit prints each swept row's leaf class and recording time beside
// the tombstone's retain-until and sweep time, and finds what the
// tombstone proves by itself: swept before its own retain-until, retained
// until before the row was recorded, swept after the audit's clock, or a
// class or status other than the leaf's. A tombstone consistent with
// itself is found early against the periods ledgerd logged at start (leaf
// 0) and those given with --retention, whichever is shorter.
func TestAuditFindsATombstoneBeforeItsTime(t *testing.T) {
	tests := []struct {
		name string
		tomb func(r *ledger.Row, now time.Time) ledger.Tombstone
		want string // "": found against the periods alone
	}{
		{"swept before its retain-until", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now.AddDate(1, 0, 0), SweptAt: now}
		}, "before its own retain-until"},
		{"retained until before it was recorded", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RecordedAt.Add(-48 * time.Hour), SweptAt: now}
		}, "before the row was recorded"},
		{"swept after the audit", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now.AddDate(1, 0, 0), SweptAt: now.AddDate(1, 0, 0)}
		}, "after the time of this audit"},
		{"another status", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: ledger.Unauthorized, Class: r.Class, RetainUntil: r.RecordedAt.Add(time.Minute), SweptAt: r.RecordedAt.Add(time.Minute)}
		}, `swept as status "unauthorized", the leaf says "authorized"`},
		{"due by its own dates", func(r *ledger.Row, _ time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RecordedAt.Add(time.Minute), SweptAt: r.RecordedAt.Add(2 * time.Minute)}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			f.logged(t, f.rowID)
			kept := filepath.Join(t.TempDir(), "kept.checkpoint")
			if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
				t.Fatalf("checkpoint: %s", errs)
			}
			key := f.verifierKey(t)
			audit := []string{"log", "audit", "--from", kept, "--log-key", key, "--all"}
			if code, out, errs := f.ctl(t, "auditor", audit...); code != 0 {
				t.Fatalf("audit before the sweep: %d %s %s", code, out, errs)
			}

			f.sweepBehind(t, f.rowID, tc.tomb)
			code, out, errs := f.ctl(t, "auditor", audit...)
			if !strings.Contains(out, "swept: row "+f.rowID) || !strings.Contains(out, "leaf class money_moved, recorded 20") || !strings.Contains(out, "retain-until") {
				t.Fatalf("audit does not show the swept row beside its leaf: %d\n%s%s", code, out, errs)
			}
			if tc.want == "" {
				want := "before its class keeps it under the policy of leaf 0 (18 months from "
				if code != exitCheckFailed || !strings.Contains(out, want) {
					t.Fatalf("audit of a tombstone consistent with itself: %d\n%s%s\nwant %q", code, out, errs, want)
				}
				if code, out, errs := f.ctl(t, "auditor", append(audit, "--retention", "money_moved=18")...); code != exitUsage || !strings.Contains(out+errs, "--retention") {
					t.Fatalf("audit with a period without a unit: %d %s %s", code, out, errs)
				}
				// A longer --retention does not lengthen the logged period.
				code, out, errs = f.ctl(t, "auditor", append(audit, "--retention", "money_moved=24 months")...)
				if code != exitCheckFailed || !strings.Contains(out, want) {
					t.Fatalf("audit with a longer --retention: %d\n%s%s\nwant %q", code, out, errs, want)
				}
				code, out, errs = f.ctl(t, "auditor", append(audit, "--retention", "money_moved=12 months,read_only=90d")...)
				tc.want = "before its class keeps it under --retention (12 months from "
			}
			if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, tc.want) {
				t.Fatalf("audit after the sweep: %d\n%s%s\nwant %q", code, out, errs, tc.want)
			}
		})
	}
}

// A dispute event keeps its row the incident period past the event, and
// while its dispute is open; the policy leaf of each start says so. A
// disputed row removed with a tombstone a sweep might have left at once
// is found by the audit on the dispute leaf: kept past the event, and
// swept with its dispute open.
func TestAuditFindsADisputedRowSweptEarly(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "chargeback"); code != 0 {
		t.Fatalf("dispute open: %d %s", code, errs)
	}
	if code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--wait", "20s", "--out", filepath.Join(t.TempDir(), "event.proof")); code != 0 {
		t.Fatalf("proof of the dispute event: %d %s", code, errs)
	}
	key := f.verifierKey(t)
	audit := []string{"log", "audit", "--from", kept, "--log-key", key, "--all"}
	if code, out, errs := f.ctl(t, "auditor", audit...); code != 0 {
		t.Fatalf("audit before the removal: %d %s %s", code, out, errs)
	}
	f.sweepBehind(t, f.rowID, func(r *ledger.Row, now time.Time) ledger.Tombstone {
		return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RecordedAt.Add(time.Minute), SweptAt: now}
	})
	code, out, errs := f.ctl(t, "auditor", audit...)
	for _, want := range []string{"(dispute event 0 of row " + f.rowID + " at ", "the row is kept 12 months past a dispute event", "leaves its dispute open"} {
		if code != exitCheckFailed || !strings.Contains(out, want) {
			t.Fatalf("audit after the removal: %d\n%s%s\nwant %q", code, out, errs, want)
		}
	}
}

// expiredWith is a ROW_EXPIRED answer whose tombstone says only meta.
func expiredWith(meta map[string]string) error {
	st := status.New(codes.NotFound, "row was removed by retention")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "ROW_EXPIRED", Domain: "pactledger", Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

// A server that deletes a logged row and answers its GetRow as swept
// with a tombstone missing a value a reading key is always told (its
// retain-until, sweep time, class or status), or as a row this key may
// not read, hides a deletion: a reading key's role reads every row, and
// is told each value of a tombstone. The audit finds both, with and
// without --all.
func TestAuditFindsARowDeletedBehindAnIncompleteAnswer(t *testing.T) {
	tests := []struct {
		name   string
		answer func() error
		want   string
	}{
		{"swept, no values", func() error { return expiredWith(nil) }, "its tombstone lacks retainUntil, sweptAt, retentionClass, status"},
		{"swept, class and status only", func() error {
			return expiredWith(map[string]string{"retentionClass": "money_moved", "status": "authorized"})
		}, "its tombstone lacks retainUntil, sweptAt"},
		{"swept, times not RFC 3339", func() error {
			return expiredWith(map[string]string{"retentionClass": "money_moved", "status": "authorized", "retainUntil": "soon", "sweptAt": "-"})
		}, `retainUntil "soon" is not an RFC 3339 time; sweptAt "-" is not an RFC 3339 time`},
		{"not readable", func() error { return status.Error(codes.PermissionDenied, "this key may not read the row") }, "the server refuses to show it to this key, whose role reads every row"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			kept, _, key := f.keptAudit(t)
			deleted := f.rowID
			f.edit(t, tamper.DropRow(deleted))
			s := f.split(t)
			s.row = func(ctx context.Context, r *ledgerv1.GetRowRequest) (*ledgerv1.GetRowResponse, error) {
				if r.GetId() == deleted {
					return nil, tc.answer()
				}
				return s.c.GetRow(ctx, r)
			}
			want := "row " + deleted
			for _, all := range []bool{false, true} {
				code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
				if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, want) || !strings.Contains(out, tc.want) {
					t.Errorf("audit (--all %v) of row %s deleted behind that answer: exit %d, want %d with %q\n%s%s", all, deleted, code, exitCheckFailed, tc.want, out, errs)
				}
			}
		})
	}
}

// A writer key reads no rows: the audit with one stops on the server's
// refusal to list them and names the roles that compare rows, rather
// than reporting each row the server will not show it as a mismatch, or
// passing.
func TestAuditWithAWriterKeyStopsOnTheRefusal(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "writer", auditArgs(kept, key, all)...)
		if code != exitAuth || strings.Contains(out, "MISMATCH") || strings.Contains(out, "audit passed") || !strings.Contains(errs, "support, auditor or admin") {
			t.Fatalf("audit (--all %v) with a writer key: exit %d, want %d naming the roles that read rows\n%s%s", all, code, exitAuth, out, errs)
		}
	}
}

// The default audit, from a checkpoint kept after a row's dispute was
// logged, checks the dispute's hold on the row as --all does: the row
// answered as swept while its last dispute event leaves the dispute open
// (and before the period past the event) is a finding, though the
// dispute's leaf is before the kept checkpoint.
func TestDefaultAuditFindsARowSweptWhileADisputeLoggedBeforeTheKeptCheckpointHeldIt(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "chargeback"); code != 0 {
		t.Fatalf("dispute open: %d %s", code, errs)
	}
	file := filepath.Join(t.TempDir(), "event.proof")
	if code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--wait", "20s", "--out", file); code != 0 {
		t.Fatalf("proof of the dispute event: %d %s", code, errs)
	}
	_, index := leafOf(t, file)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"}))
	key := f.verifierKey(t)
	if code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...); code != 0 {
		t.Fatalf("audit before the removal: %d %s %s", code, out, errs)
	}
	f.sweepBehind(t, f.rowID, func(r *ledger.Row, now time.Time) ledger.Tombstone {
		return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RecordedAt.Add(time.Minute), SweptAt: now}
	})
	for _, all := range []bool{true, false} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		for _, want := range []string{
			"leaf " + itoa(index) + " (dispute event 0 of row " + f.rowID + " at ", "the row is kept 12 months past a dispute event",
			"leaf " + itoa(index) + " (dispute event 0 of row " + f.rowID + "): the row's last dispute event leaves its dispute open",
		} {
			if code != exitCheckFailed || !strings.Contains(out, want) {
				t.Fatalf("audit (--all %v): exit %d, want %d with %q\n%s%s", all, code, exitCheckFailed, want, out, errs)
			}
		}
	}
}
