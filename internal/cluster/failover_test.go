package cluster

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pgtest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestFailoverUnderLoad: a primary with a synchronous streaming standby,
// three replicas on a DSN naming both (target_session_attrs=read-write),
// writers spread across them and retrying what fails. The primary
// crashes; writes fail with UNAVAILABLE until the standby is promoted,
// then resume on every replica without a restart. Every acknowledged row
// is on the promoted standby, and its Merkle log goes on from the
// checkpoint signed before the crash (a consistency proof verifies). The
// time without writes is reported.
func TestFailoverUnderLoad(t *testing.T) {
	pgtest.Available(t)
	primary, err := pgtest.New("primary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Remove() })
	dsn := primary.CreateDB(t)
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	standby, err := primary.Standby(t.Context(), "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Remove() })
	e := newEnv(t, pgtest.MultiHostDSN(pc.Database, primary, standby), 1500*time.Millisecond, 2*time.Second)
	rs := []*replica{e.startInProcess("r1"), e.startInProcess("r2"), e.startInProcess("r3")}

	w := startLoad(t, rs, e.corpus(3000, "failover"), 6, 20*time.Millisecond)
	poll(t, "writes before the failover", 60*time.Second, func() bool { n, _ := w.counts(); return n >= 150 })
	old := e.checkpoint(t, rs[0])

	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	_, failedBefore := w.counts()
	poll(t, "writes fail while no primary runs", 30*time.Second, func() bool { _, f := w.counts(); return f > failedBefore })
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	ackedAt, _ := w.counts()
	poll(t, "writes resume on every replica", 60*time.Second, func() bool {
		n, _ := w.counts()
		for _, r := range rs {
			if !w.lastAck(r.name).After(promoted) {
				return false
			}
		}
		return n >= ackedAt+150
	})
	w.halt()
	resumed := time.Now()
	for _, err := range w.failures() {
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a write failed with %v, want UNAVAILABLE", err)
			break
		}
	}
	ids := w.ids()
	standbyDSN := standby.DSN(pc.Database)
	if n := missingRows(t, standbyDSN, ids); n > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing on the promoted standby", n, len(ids))
	}
	poll(t, "every acknowledged row in the log", 60*time.Second, func() bool {
		var n int
		queryRow(t, standbyDSN, "SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM log_index x WHERE x.ref = a.id)", []any{ids}, &n)
		return n == 0
	})
	newer := e.checkpoint(t, rs[1])
	rep, err := rs[2].client.GetConsistencyProof(as(t.Context(), auditorKey), &ledgerv1.GetConsistencyProofRequest{From: old.Size, To: newer.Size})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyConsistency(old, newer, rep); err != nil {
		t.Errorf("consistency from size %d (before the crash) to %d: %v", old.Size, newer.Size, err)
	}
	acked, failed := w.counts()
	t.Logf("%d writes acknowledged, %d attempts refused as UNAVAILABLE; time without writes %s (crash to promote %s); log %d -> %d leaves",
		acked, failed, w.longestGap(crashed.Add(-time.Second), resumed).Round(time.Millisecond), promoted.Sub(crashed).Round(time.Millisecond), old.Size, newer.Size)
}
