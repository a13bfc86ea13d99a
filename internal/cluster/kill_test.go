package cluster

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The leases whose jobs every replica runs and one holds at a time.
var singletons = []string{ledger.LeaseLogIntegrator, ledger.LeaseSweeper, ledger.LeaseDrillScheduler}

// TestKillReplicaUnderLoad: three ledgerd processes on one database and
// one bucket, writers spread across them (moving on to the next replica
// when one does not answer). The first replica, which holds every
// singleton's lease, is killed with SIGKILL while outbox entries are
// claimed by its uploader (the S3 server is paused so that they stay
// claimed). Then every acknowledged row is in the database with its
// evidence object recorded as uploaded; the dead replica's claimed
// entries are uploaded by the others once their claims expire; each lease
// is taken by another replica with a larger token; and the Merkle log
// keeps growing: a consistency proof from the checkpoint signed before
// the kill to the one after verifies, and every acknowledged row is a
// leaf. The integrity check (ledgerctl fsck) on a surviving replica finds
// every row's evidence as written, in the database and in the bucket.
// The takeover times are reported.
func TestKillReplicaUnderLoad(t *testing.T) {
	pgtest.Available(t)
	if testing.Short() {
		t.Skip("builds ledgerd and runs three processes")
	}
	dsn := pgtest.CreateDB(t)
	const leaseTTL, claimTTL = 1500 * time.Millisecond, 2 * time.Second
	e := newEnv(t, dsn, leaseTTL, claimTTL)
	// While the S3 server is paused a round hangs until its claim runs
	// out, and re-puts the segment plans recorded by others as well. A
	// small batch keeps one round from claiming the whole outbox, so that
	// r1's rounds find entries of their own to claim.
	e.uploadBatch = 16
	r1 := e.startProcess("r1")
	poll(t, "r1 holds every singleton's lease", 30*time.Second, func() bool {
		h := holders(t, dsn)
		for _, name := range singletons {
			if l := h[name]; !l.of("r1") || !l.live {
				return false
			}
		}
		return true
	})
	before := holders(t, dsn)
	rs := []*replica{r1, e.startProcess("r2"), e.startProcess("r3")}

	// A quarter of the corpus is written before the S3 server is paused,
	// the rest after: so the outbox fills while uploads hang, however fast
	// the replicas ran the first part.
	corpus := e.corpus(600, "kill")
	early := startLoad(t, rs, corpus[:150], 9, 0)
	early.wait()
	if acked, failed := early.counts(); acked != 150 || failed != 0 {
		t.Fatalf("before the pause: %d writes acknowledged, %d not (%v); want all 150", acked, failed, early.failures())
	}
	var old proof.Checkpoint
	poll(t, "a checkpoint of the writes before the kill", 30*time.Second, func() bool {
		old = e.checkpoint(t, rs[1])
		return old.Size > 0
	})

	// Uploads hang while the S3 server is paused: claims stay claimed.
	if err := syscall.Kill(e.s3.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(e.s3.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	w := startLoad(t, rs, corpus[150:], 9, 0)
	var claimed []int64
	pollOr(t, "entries claimed by r1", 30*time.Second, func() bool {
		claimed = claimedBy(t, dsn, "r1")
		return len(claimed) > 0
	}, func() string {
		acked, failed := w.counts()
		var plans int
		queryRow(t, dsn, "SELECT count(*) FROM segment_plans", nil, &plans)
		return fmt.Sprintf("%d writes acknowledged since the pause, %d not; outbox by holder: %s; %d segment plans recorded\n%s\n%s\n%s",
			acked, failed, outboxClaims(t, dsn), plans, r1.logTail(), rs[1].logTail(), rs[2].logTail())
	})
	r1.kill(t)
	killed := time.Now()
	resume()

	takeover := map[string]time.Duration{}
	poll(t, "every lease taken over by another replica", 30*time.Second, func() bool {
		h := holders(t, dsn)
		for _, name := range singletons {
			l := h[name]
			if _, done := takeover[name]; !done && l.live && !l.of("r1") && l.token > before[name].token {
				takeover[name] = time.Since(killed)
			}
		}
		return len(takeover) == len(singletons)
	})
	poll(t, "r1's claimed entries uploaded by the others", 60*time.Second, func() bool {
		return len(stillQueued(t, dsn, claimed)) == 0
	})
	uploadedAfter := time.Since(killed)
	w.wait()
	acked, failed := w.counts()
	acked1, failed1 := early.counts()
	acked, failed = acked+acked1, failed+failed1
	ids := append(early.ids(), w.ids()...)
	if n := missingRows(t, dsn, ids); n > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing", n, acked)
	}
	poll(t, "the outbox drained", 60*time.Second, func() bool {
		var n int
		queryRow(t, dsn, "SELECT count(*) FROM outbox", nil, &n)
		return n == 0
	})
	var noObject int
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = ledger.EvidenceKey(id)
	}
	queryRow(t, dsn, "SELECT count(*) FROM unnest($1::text[]) AS k(key) WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.key = k.key)", []any{keys}, &noObject)
	if noObject > 0 {
		t.Errorf("%d acknowledged rows have no uploaded evidence object recorded", noObject)
	}

	e.fsck(t, rs[2], dsn)

	poll(t, "every acknowledged row in the log", 60*time.Second, func() bool {
		var n int
		queryRow(t, dsn, "SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM log_index x WHERE x.ref = a.id)", []any{ids}, &n)
		return n == 0
	})
	newer := e.checkpoint(t, rs[2])
	rep, err := rs[1].client.GetConsistencyProof(as(t.Context(), auditorKey), &ledgerv1.GetConsistencyProofRequest{From: old.Size, To: newer.Size})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyConsistency(old, newer, rep); err != nil {
		t.Errorf("consistency from size %d (before the kill) to %d: %v", old.Size, newer.Size, err)
	}
	// The integrator drops the leaves of published full tiles: those are
	// in the bucket, and counted.
	var leaves, dropped int64
	queryRow(t, dsn, "SELECT count(*) FROM log_leaves", nil, &leaves)
	queryRow(t, dsn, "SELECT coalesce((SELECT n FROM log_state WHERE name = 'pruned'), 0)", nil, &dropped)
	if leaves+dropped != newer.Size {
		t.Errorf("%d leaves stored and %d dropped, the checkpoint says %d", leaves, dropped, newer.Size)
	}
	h := holders(t, dsn)
	for _, name := range singletons {
		t.Logf("lease %s: r1 token %d, taken by %s (token %d) %s after the kill (ttl %s)",
			name, before[name].token, h[name].holder, h[name].token, takeover[name].Round(time.Millisecond), leaseTTL)
	}
	t.Logf("%d writes acknowledged, %d not; %d entries claimed by r1 at the kill, uploaded by the others within %s (claim ttl %s); log %d -> %d leaves, %d of them in published tiles only",
		acked, failed, len(claimed), uploadedAfter.Round(time.Millisecond), claimTTL, old.Size, newer.Size, dropped)
}

// fsck runs the integrity check (ledgerctl fsck) on replica r, page by
// page: every row in the database checked, its evidence compared with the
// write-once copy, and nothing differs.
func (e *env) fsck(t *testing.T, r *replica, dsn string) {
	t.Helper()
	var rows int
	queryRow(t, dsn, "SELECT count(*) FROM ledger_rows", nil, &rows)
	checked, compared := 0, 0
	for tok := ""; ; {
		rep, err := r.client.CheckIntegrity(as(t.Context(), auditorKey), &ledgerv1.CheckIntegrityRequest{PageSize: 250, PageToken: tok})
		if err != nil {
			t.Fatalf("%s: CheckIntegrity: %v", r.name, err)
		}
		checked, compared = checked+int(rep.GetRowsChecked()), compared+int(rep.GetWormCompared())
		for _, f := range rep.GetFindings() {
			t.Errorf("fsck: row %s: %s", f.GetRowId(), f.GetProblem())
		}
		if tok = rep.GetNextPageToken(); tok == "" {
			break
		}
	}
	if checked != rows || compared != rows {
		t.Errorf("fsck checked %d rows and compared %d write-once copies; the database holds %d rows", checked, compared, rows)
	}
}

// checkpoint returns the replica's latest checkpoint, opened with the
// log's verifier key.
func (e *env) checkpoint(t *testing.T, r *replica) proof.Checkpoint {
	t.Helper()
	rep, err := r.client.GetCheckpoint(as(t.Context(), auditorKey), &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatalf("%s: GetCheckpoint: %v", r.name, err)
	}
	c, err := proof.Open([]byte(rep.GetCheckpoint()), e.vkey)
	if err != nil {
		t.Fatalf("%s: checkpoint: %v", r.name, err)
	}
	return c
}

// verifyConsistency checks a consistency proof from old to newer.
func verifyConsistency(old, newer proof.Checkpoint, rep *ledgerv1.GetConsistencyProofResponse) error {
	path := make([]tlog.Hash, len(rep.GetProof()))
	for i, h := range rep.GetProof() {
		copy(path[i][:], h)
	}
	return proof.VerifyConsistency(old, newer, path)
}

// claimedBy returns the outbox entries the replica named name
// (leases.holder, with a suffix of its own) has a live claim on.
func claimedBy(t *testing.T, dsn, name string) []int64 {
	t.Helper()
	var seqs []int64
	queryRow(t, dsn, "SELECT coalesce(array_agg(seq), '{}') FROM outbox WHERE starts_with(claimed_by, $1) AND claim_until > clock_timestamp()", []any{name + "-"}, &seqs)
	return seqs
}

// outboxClaims describes the outbox's entries by who holds a live claim
// on them, for a failure message.
func outboxClaims(t *testing.T, dsn string) string {
	t.Helper()
	var s string
	queryRow(t, dsn, `SELECT coalesce(string_agg(h || ': ' || n, ', '), 'empty') FROM (
	SELECT CASE WHEN claim_until > clock_timestamp() THEN claimed_by ELSE 'unclaimed' END AS h, count(*) AS n
	FROM outbox GROUP BY 1 ORDER BY 1) AS c`, nil, &s)
	return s
}

// stillQueued returns which of seqs are still in the outbox.
func stillQueued(t *testing.T, dsn string, seqs []int64) []int64 {
	t.Helper()
	var left []int64
	queryRow(t, dsn, "SELECT coalesce(array_agg(seq), '{}') FROM outbox WHERE seq = ANY($1)", []any{seqs}, &left)
	slices.Sort(left)
	return left
}
