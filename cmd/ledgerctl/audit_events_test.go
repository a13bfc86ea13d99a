package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// keptAudit logs the fixture's row, keeps a checkpoint, logs a later row
// and checks that the audit passes from the kept checkpoint, with and
// without --all. It returns the kept checkpoint's file, the later row and
// the log's verifier key.
func (f *fixture) keptAudit(t *testing.T) (kept, later, key string) {
	t.Helper()
	f.logged(t, f.rowID)
	kept = filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	later = f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"})
	f.logged(t, later)
	key = f.verifierKey(t)
	for _, all := range []bool{false, true} {
		if code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...); code != 0 {
			t.Fatalf("audit (--all %v) before the edit: %d %s %s", all, code, out, errs)
		}
	}
	return kept, later, key
}

func auditArgs(kept, key string, all bool, more ...string) []string {
	args := append([]string{"log", "audit", "--from", kept, "--log-key", key, "--settle", "500ms"}, more...)
	if all {
		args = append(args, "--all")
	}
	return args
}

// resolvedBySupport appends to row id, in the row store only, a dispute
// event resolving it as authorized by the customer, at time at.
func resolvedBySupport(id string, at time.Time) func(*bbolt.Tx) error {
	return tamper.EditRow(id, func(r *ledger.Row) {
		r.Dispute = ledger.DisputeResolvedCustomerAuthorized
		r.DisputeEvents = append(r.DisputeEvents, ledger.DisputeEvent{At: at, Status: ledger.DisputeResolvedCustomerAuthorized, Note: "resolved customer authorized", By: "support"})
	})
}

// A dispute event added in the row store only (no leaf, none queued) is
// a mismatch of the audit, whether the row's leaf is read from the tiles
// or the row is checked through its proof.
func TestAuditFindsADisputeEventAddedBehindTheLog(t *testing.T) {
	f := start(t)
	kept, later, key := f.keptAudit(t)
	f.edit(t, resolvedBySupport(f.rowID, time.Now().UTC()))
	f.edit(t, resolvedBySupport(later, time.Now().UTC()))
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		for _, id := range []string{f.rowID, later} {
			want := "dispute event 0 of row " + id + " (resolved_customer_authorized"
			if code != exitCheckFailed || !strings.Contains(out, "MISMATCH "+want) || !strings.Contains(out, "has no leaf in the log") {
				t.Fatalf("audit (--all %v) after the edit: %d\n%s%s\nwant a MISMATCH %q", all, code, out, errs, want)
			}
		}
	}
}

// The proof of a dispute event added in the row store only is refused
// as an integrity failure at once, not "not yet logged" for ever: over
// gRPC (ledgerctl's exit code 7) and REST (409).
func TestProofOfAnEventWithNoLeafIsAnIntegrityFailure(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	f.edit(t, resolvedBySupport(f.rowID, time.Now().UTC()))
	// Exit 7 (not 6, "not yet logged" after --wait) is the answer given
	// at once, without waiting for a leaf that is not queued.
	code, _, errs := f.ctl(t, "auditor", "proof", f.rowID, "--event", "dispute/0", "--wait", "5s")
	if want := "has no leaf in the log and none is queued"; code != exitNoLeaf || !strings.Contains(errs, want) || !strings.Contains(errs, "fsck") {
		t.Fatalf("proof --event dispute/0: exit %d %s, want %d and %q", code, errs, exitNoLeaf, want)
	}
	code, body := f.restGet(t, "auditor", f.http+"/v1/rows/"+f.rowID+"/proof?event=dispute/0")
	var st struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusConflict || st.Code != int(codes.FailedPrecondition) ||
		!strings.Contains(st.Message, "none is queued") {
		t.Fatalf("GET proof of dispute/0: %d %s, want 409 FailedPrecondition", code, body)
	}
}

// An event the row shows whose leaf is neither in the audited tree nor
// given by the server is not yet checkable when it was recorded after the
// audited tree's last leaf, and a mismatch when leaves recorded after it
// are in the tree: the log takes leaves in commit order. A server that
// says "not yet logged" for ever cannot hide an old event that way.
func TestAuditDatesAnEventTheLogDoesNotHold(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	f.edit(t, resolvedBySupport(f.rowID, time.Now().UTC().Add(-time.Hour)))
	f.edit(t, resolvedBySupport(f.rowID, time.Now().UTC()))
	s := f.split(t)
	s.rowProof = func(ctx context.Context, r *ledgerv1.GetRowProofRequest) (*ledgerv1.GetRowProofResponse, error) {
		if r.GetEvent() != "" {
			return nil, status.Error(codes.Unavailable, errNotLogged.Error()+": "+r.GetEvent())
		}
		return s.c.GetRowProof(ctx, r)
	}
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH dispute event 0 of row "+f.rowID) ||
		strings.Contains(out, "MISMATCH dispute event 1 ") || !strings.Contains(out, "not yet checkable: dispute event 1 of row "+f.rowID) {
		t.Fatalf("audit: %d\n%s%s\nwant event 0 a mismatch, event 1 not yet checkable", code, out, errs)
	}
}

// The default audit (since a kept checkpoint) finds a row deleted from
// the row store whose leaf is older than the kept checkpoint, and says
// which leaves it compared with their rows.
func TestDefaultAuditFindsAnOldRowDeleted(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	f.edit(t, tamper.DropRow(f.rowID))
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, false)...)
	want := "the ledger no longer holds row " + f.rowID + ", and no retention sweep removed it"
	if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, want) {
		t.Fatalf("audit: %d\n%s%s\nwant %q", code, out, errs, want)
	}
	if !strings.Contains(out, "before size") || !strings.Contains(out, "--all") {
		t.Fatalf("audit does not say what it did with the leaves before the kept checkpoint:\n%s", out)
	}
}

// Without an API key the audit checks the log only, and its last line
// says so rather than that every leaf matches the ledger.
func TestAuditWithoutAKeySaysRowsWereNotCompared(t *testing.T) {
	f := start(t)
	kept, _, _ := f.keptAudit(t)
	code, out, errs := f.ctl(t, "nobody", "log", "audit", "--from", kept)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if code != 0 || strings.Contains(out, "matches the ledger") || !strings.Contains(last, "audit passed: the log only grew; rows were not compared (no API key)") {
		t.Fatalf("audit without a key: %d\n%s%s", code, out, errs)
	}
}
