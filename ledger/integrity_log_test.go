package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// integrity runs CheckIntegrity over every page.
func integrity(t *testing.T, h *harness) *ledger.IntegrityPage {
	t.Helper()
	all := &ledger.IntegrityPage{}
	token := ""
	for {
		p, err := h.l.CheckIntegrity(context.Background(), 2, token)
		if err != nil {
			t.Fatal(err)
		}
		all.RowsChecked += p.RowsChecked
		all.LeavesChecked += p.LeavesChecked
		all.NotYetLogged += p.NotYetLogged
		all.Findings = append(all.Findings, p.Findings...)
		if token = p.Next; token == "" {
			return all
		}
	}
}

// tamper stops the ledger, edits its bbolt file directly and opens it again.
func (h *harness) tamper(t *testing.T, edit func(tx *bbolt.Tx) error) {
	t.Helper()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Apply(filepath.Join(h.dir, "ledger.db"), edit); err != nil {
		t.Fatal(err)
	}
	h.open(t)
	h.enableLog(t, 0)
}

// fsck compares every row and dispute event with its leaf and rebuilds the
// tree from the stored leaves: a dropped, inserted or rewritten row, an
// edited dispute event and an edited leaf are each found; rows not yet
// integrated and rows swept by retention are not findings.
func TestIntegrityChecksTheLog(t *testing.T) {
	tests := []struct {
		name string
		edit func(rows []*ledger.Row) func(tx *bbolt.Tx) error
		want string
	}{
		{"drop a row", func(rows []*ledger.Row) func(*bbolt.Tx) error { return tamper.DropRow(rows[1].ID) },
			"names row %s, which the row store does not hold and no retention sweep removed"},
		{"insert a forged row", func(rows []*ledger.Row) func(*bbolt.Tx) error {
			return func(tx *bbolt.Tx) error {
				return tamper.EditRow(rows[1].ID, func(r *ledger.Row) { r.ID = strings.Repeat("f", 64) })(tx)
			}
		}, "row " + strings.Repeat("f", 64) + " has no leaf in the log"},
		{"rewrite a row's status", func(rows []*ledger.Row) func(*bbolt.Tx) error {
			return tamper.EditRow(rows[1].ID, func(r *ledger.Row) { r.Status = ledger.Unauthorized })
		}, `differs from row %s: status is "unauthorized" in the row store, "authorized" in the leaf`},
		{"rewrite a dispute event", func(rows []*ledger.Row) func(*bbolt.Tx) error {
			return tamper.EditRow(rows[0].ID, func(r *ledger.Row) { r.DisputeEvents[0].Status = ledger.DisputeResolvedOther })
		}, "differs from dispute event 0 of row"},
		{"rewrite a leaf", func([]*ledger.Row) func(*bbolt.Tx) error {
			return tamper.EditLeaf(1, func(v []byte) []byte {
				return bytes.Replace(v, []byte("status authorized"), []byte("status incident"), 1)
			})
		}, "tree root does not match checkpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ctx := context.Background()
			var rows []*ledger.Row
			for _, spec := range []pacttest.Spec{
				{Target: "F-1"},
				{Target: "F-2", User: "acct-2"},
				{Target: "F-3", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}, // read-only: no evidence kept
			} {
				r, _ := h.append(t, in(h.sc.Mint(spec)))
				rows = append(rows, r)
			}
			if _, err := h.l.AppendDispute(ctx, rows[0].ID, ledger.DisputeOpen, "never asked", "support-key"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			// A row committed after the last integration is not a finding.
			h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "F-4", User: "acct-4"})))
			got := integrity(t, h)
			if len(got.Findings) != 0 || got.LeavesChecked != 4 || got.NotYetLogged != 1 || got.RowsChecked != 4 {
				t.Fatalf("clean ledger: %+v", got)
			}

			h.tamper(t, tc.edit(rows))
			got = integrity(t, h)
			want := strings.ReplaceAll(tc.want, "%s", rows[1].ID)
			var problems []string
			for _, f := range got.Findings {
				problems = append(problems, f.RowID+": "+f.Problem)
			}
			if !strings.Contains(strings.Join(problems, "\n"), want) {
				t.Fatalf("findings:\n%s\nwant one with %q", strings.Join(problems, "\n"), want)
			}
		})
	}
}

// fsck over a log whose first tile left the row store reads its leaves
// back from write-once storage: a clean ledger has no findings (each
// leaf is where the index of the ref in its lines points), and an entry
// bundle altered there is a finding.
func TestIntegrityReadsDroppedTiles(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	var rows []*ledger.Row
	for i := range 300 {
		r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("F-%d", i), User: fmt.Sprintf("acct-%d", i%7)})))
		rows = append(rows, r)
		if i == 3 {
			if _, err := h.l.AppendDispute(ctx, rows[0].ID, ledger.DisputeOpen, "never asked", "support-key"); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.settleLog(t, 256)
	got := integrity(t, h)
	if len(got.Findings) != 0 || got.LeavesChecked != 301 || got.RowsChecked != 300 {
		t.Fatalf("clean ledger with its first tile in write-once storage only: %+v", got)
	}

	alter(t, h, "log/tile/entries/000", func(b []byte) []byte {
		return bytes.Replace(b, []byte("status authorized"), []byte("status incident__"), 1)
	})
	h.tamper(t, func(*bbolt.Tx) error { return nil }) // a new ledger: nothing cached
	got = integrity(t, h)
	var problems []string
	for _, f := range got.Findings {
		problems = append(problems, f.Problem)
	}
	if want := "leaf 0 cannot be read: log: leaf 0 in the write-once copy of entry bundle tile/entries/000 does not hash to the log's: it was altered"; !slices.Contains(problems, want) {
		t.Fatalf("findings:\n%s\nwant %q", strings.Join(problems, "\n"), want)
	}
}

// A row, dispute event or incident closure the row store holds with no
// leaf in the log and none queued will never be logged: its proof is
// ErrNoLeaf, not ErrNotLogged, naming what has no leaf. One queued is
// still not yet logged.
func TestProofOfWhatHasNoLeafNorQueued(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "F-1"})))
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "INC-1", ScopesUsed: []string{"plan:change"}})))
	if inc.IncidentID == "" {
		t.Fatal("the incident row names no incident")
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	forged := strings.Repeat("f", 64)
	h.tamper(t, func(tx *bbolt.Tx) error {
		if err := tamper.EditRow(r.ID, func(r *ledger.Row) {
			r.DisputeEvents = append(r.DisputeEvents, ledger.DisputeEvent{At: time.Now().UTC(), Status: ledger.DisputeResolvedCustomerAuthorized, By: "support"})
		})(tx); err != nil {
			return err
		}
		if err := tamper.EditIncident(inc.IncidentID, func(i *ledger.IncidentRecord) { i.ClosedAt, i.ClosedBy = time.Now().UTC(), "admin" })(tx); err != nil {
			return err
		}
		return tamper.EditRow(r.ID, func(r *ledger.Row) { r.ID = forged })(tx)
	})
	for ref, want := range map[string]string{
		"dispute/" + r.ID + "/0":                "dispute event 0 of row " + r.ID + " has no leaf in the log and none is queued",
		"incident/" + inc.IncidentID + "/close": "the closure of incident " + inc.IncidentID + " has no leaf in the log and none is queued",
		forged:                                  "row " + forged + " has no leaf in the log and none is queued",
	} {
		_, err := h.l.Proof(ctx, ref)
		if !errors.Is(err, ledger.ErrNoLeaf) || errors.Is(err, ledger.ErrNotLogged) || !strings.Contains(err.Error(), want) {
			t.Errorf("Proof(%s): %v, want ErrNoLeaf: %q", ref, err, want)
		}
	}
	// Through the ledger, the next event is queued: not yet logged.
	if _, err := h.l.AppendDispute(ctx, r.ID, ledger.DisputeOpen, "never asked", "support-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Proof(ctx, "dispute/"+r.ID+"/1"); !errors.Is(err, ledger.ErrNotLogged) {
		t.Fatalf("Proof of a queued event: %v, want ErrNotLogged", err)
	}
}

// fsck finds a leaf the ledger does not write, queued outside it: one of
// another first line, which parses to nothing and so no check would read,
// and a second leaf of a dispute event spelt "event 00", which every check
// reads as event 0. `ledgerctl log audit` finds both too.
func TestIntegrityFindsLeavesTheLedgerDoesNotWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		leaf func(row string) string
		want string
	}{
		{"another version", func(row string) string {
			return "pactledger-leaf v0\nkind receipt\nrow " + row + "\n"
		}, "is not a leaf this version of the ledger writes"},
		{"an event number spelt otherwise", func(row string) string {
			return ledger.LeafVersion + "\nkind dispute\nrow " + row + "\nevent 00\nstatus resolved_other\nnote -\nby -\nat 2026-10-07T13:12:45Z\n"
		}, `records dispute event "00" of row %s, not a number as the ledger writes it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ctx := context.Background()
			row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "V-1"})))
			if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "never asked", "support-key"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("clean ledger: %+v", got)
			}
			if err := h.store.Update(ctx, func(tx ledger.Tx) error { return tx.QueueLeaf("outside/"+tc.name, []byte(tc.leaf(row.ID))) }); err != nil {
				t.Fatal(err)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			var problems []string
			for _, f := range integrity(t, h).Findings {
				problems = append(problems, f.RowID+": "+f.Problem)
			}
			if want := strings.ReplaceAll(tc.want, "%s", row.ID); !strings.Contains(strings.Join(problems, "\n"), want) {
				t.Fatalf("findings:\n%s\nwant one with %q", strings.Join(problems, "\n"), want)
			}
		})
	}
}
