package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// accessHarness is a harness whose ledger knows the access log's
// retention (12 months), with an access log on its store.
func accessHarness(t *testing.T) (*harness, *ledger.AccessLog) {
	t.Helper()
	h := newHarness(t)
	h.accessKept = retention.Period{Months: 12}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h.open(t)
	return h, h.accessLog()
}

func (h *harness) accessLog() *ledger.AccessLog {
	return ledger.NewAccessLog(h.store, ledger.AccessLogConfig{Retention: h.accessKept, Now: h.clock})
}

// reads records n reads by key and writes them in one batch.
func reads(t *testing.T, log *ledger.AccessLog, key string, n int) {
	t.Helper()
	for i := range n {
		a := ledger.Access{Key: key, Roles: []string{"support"}, RPC: "ListRows", Principal: fmt.Sprintf("acct-%d", i), Rows: 1, Result: "ok"}
		if i%2 == 1 { // a listing by order: whose rows came back
			a.Principal, a.Target, a.RowPrincipals = "", fmt.Sprintf("A-%d", i), []string{fmt.Sprintf("acct-%d", i)}
		}
		if err := log.Record(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// tamperAccess replaces from with to in the body of access record seq.
func tamperAccess(seq uint64, from, to string) func(tx *bbolt.Tx) error {
	return tamper.EditAccess(seq, func(b []byte) []byte { return bytes.Replace(b, []byte(from), []byte(to), 1) })
}

// An operator with the bbolt file removes or rewrites a support key's
// read after its batch was put in write-once storage: fsck compares the
// access log with the batch's copy and reports it.
func TestIntegrityFindsATamperedAccessRecord(t *testing.T) {
	tests := []struct {
		name string
		edit func(tx *bbolt.Tx) error
		want string
	}{
		{"drop", tamper.DropAccess(2), "access record 2 (written"},
		{"edit", tamperAccess(3, `"key":"support-leads"`, `"key":"auditor"`), "access record 3 differs from the write-once copy access/"},
		// Whose rows a listing returned is part of the record kept.
		{"edit whose rows", tamperAccess(4, `"rowPrincipals":["acct-3"]`, `"rowPrincipals":["acct-9"]`), "access record 4 differs from the write-once copy access/"},
		{"drop whose rows", tamperAccess(4, `,"rowPrincipals":["acct-3"]`, ``), "access record 4 differs from the write-once copy access/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, log := accessHarness(t)
			reads(t, log, "support-leads", 4)
			h.drain(t)
			if p := problems(integrity(t, h)); p != "" {
				t.Fatalf("before the edit:\n%s", p)
			}
			h.tamper(t, tc.edit)
			if p := problems(integrity(t, h)); !strings.Contains(p, tc.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", p, tc.want)
			}
		})
	}
}

// An honest access log has no findings: batches uploaded, a batch still
// queued, a batch edited before its upload (its put then fails for good:
// a dead letter), and records pruned by the access log's retention.
func TestIntegrityAcceptsAnHonestAccessLog(t *testing.T) {
	ctx := context.Background()
	h, log := accessHarness(t)
	clean := func(what string) {
		t.Helper()
		if p := problems(integrity(t, h)); p != "" {
			t.Fatalf("%s:\n%s", what, p)
		}
	}
	reads(t, log, "support-leads", 3)
	h.drain(t)
	clean("uploaded")

	reads(t, log, "auditor", 2) // records 4 and 5, queued
	clean("a batch queued")

	h.tamper(t, tamper.DropAccess(5))
	log = h.accessLog()
	clean("a queued batch edited")
	h.drain(t)
	if n, err := h.l.DeadLetterCount(ctx); err != nil || n != 1 {
		t.Fatalf("dead letters: %d, %v; want the batch missing a record", n, err)
	}
	clean("a batch dead-lettered")

	h.set(h.clock().AddDate(1, 0, 2))
	reads(t, log, "support-leads", 2)
	h.drain(t)
	// Record 4's batch is among the dead letters, never put: the prune
	// keeps it, and removes the other 3 records of a year ago.
	if n, err := log.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("pruned %d, %v; want the 3 records of a year ago whose batch was put", n, err)
	}
	clean("after the prune")

	// The first batch's object is past its retention: the store may let
	// it go, and fsck no longer reads it.
	gone := 0
	err := filepath.WalkDir(h.objDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), strings.TrimPrefix(ledger.AccessKey(1, 3), "access/")) {
			gone++
			return os.Remove(path)
		}
		return err
	})
	if err != nil || gone == 0 {
		t.Fatalf("removing the first batch's object: %d files, %v", gone, err)
	}
	clean("an expired batch let go")
}

// TestUploaderRefusesAccessRecordsEditedBeforeTheirUpload: a read
// re-attributed in the row store while its batch waits for upload (an
// unreachable bucket keeps it waiting as long as anyone likes) is not put
// as edited: the batch's entry recorded the hash of its bytes as written,
// so the batch moves to the dead letters with a reason that says so and
// an ERROR line, and nothing of it reaches write-once storage.
func TestUploaderRefusesAccessRecordsEditedBeforeTheirUpload(t *testing.T) {
	ctx := context.Background()
	h, log := accessHarness(t)
	reads(t, log, "support-leads", 3) // written and queued, not yet uploaded
	h.tamper(t, tamperAccess(2, `"key":"support-leads"`, `"key":"auditor"`))
	h.drain(t)
	out, err := h.l.Outbox(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DeadLetters) != 1 || out.DeadLetters[0].Entry.Key != ledger.AccessKey(1, 3) ||
		!strings.Contains(out.DeadLetters[0].Reason, "access records 1–3 hash to") ||
		!strings.Contains(out.DeadLetters[0].Reason, "edited in the row store before its upload") {
		t.Fatalf("dead letters: %+v; want the batch of records 1-3, refused as edited", out.DeadLetters)
	}
	if _, err := h.l.WriteOnceCopy(ctx, ledger.AccessKey(1, 3)); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the edited batch's write-once copy: %v; want none", err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "not those the ledger wrote") {
		t.Fatalf("logs:\n%s\nwant an ERROR line for the edited batch", logs)
	}
}

// TestUploaderPutsAccessBatchesQueuedWithoutAHash: a batch queued before
// its entry recorded the hash of its bytes is put as the row store holds
// it, as it was then.
func TestUploaderPutsAccessBatchesQueuedWithoutAHash(t *testing.T) {
	ctx := context.Background()
	h, log := accessHarness(t)
	reads(t, log, "support-leads", 3)
	err := h.store.Update(ctx, func(tx ledger.Tx) error {
		es, err := tx.Outbox(10)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.SHA256 == "" {
				return fmt.Errorf("outbox entry %+v records no hash", e)
			}
			if _, err := tx.Dequeue(e.Seq); err != nil {
				return err
			}
			e.SHA256 = ""
			if err := tx.Enqueue(e, h.clock()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	if n, err := h.l.DeadLetterCount(ctx); err != nil || n != 0 {
		t.Fatalf("dead letters: %d, %v", n, err)
	}
	if _, err := h.l.WriteOnceCopy(ctx, ledger.AccessKey(1, 3)); err != nil {
		t.Fatalf("the batch's write-once copy: %v", err)
	}
	if p := problems(integrity(t, h)); p != "" {
		t.Fatalf("findings:\n%s", p)
	}
}

// restoredAfterReads records reads 1-3 and uploads them, backs the row
// store up, records and uploads reads 4-6, and puts the backup back: the
// reads 4-6 are in write-once storage alone. It returns the harness and
// an access log on the restored store.
func restoredAfterReads(t *testing.T) (*harness, *ledger.AccessLog) {
	t.Helper()
	h, log := accessHarness(t)
	reads(t, log, "auditor", 3) // 1-3
	h.drain(t)
	db := filepath.Join(h.dir, "ledger.db")
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	h.open(t)
	reads(t, h.accessLog(), "support-leads", 3) // 4-6, lost with the restore
	h.drain(t)
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	h.open(t)
	return h, h.accessLog()
}

// TestAccessBatchAfterARestoreGoesUnderAKeyOfItsOwn: the row store put
// back to a copy from before a batch was uploaded numbers new reads again
// with that batch's numbers, and write-once storage holds other records
// under their key. The new batch goes under a key naming its bytes,
// recorded there, with a WARN line; it is no dead letter, fsck compares
// the log with it, and an edit of one of its records after the upload is
// found.
func TestAccessBatchAfterARestoreGoesUnderAKeyOfItsOwn(t *testing.T) {
	ctx := context.Background()
	h, log := restoredAfterReads(t)
	reads(t, log, "ops-oncall", 3) // 4-6 again, other reads
	h.drain(t)
	out, err := h.l.Outbox(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.DeadLetterCount != 0 {
		t.Fatalf("dead letters: %+v; want none", out.DeadLetters)
	}
	var locs []ledger.Location
	if err := h.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		locs, err = tx.ObjectsUnder("access/", "", 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(locs) != 2 || locs[0].Key != ledger.AccessKey(1, 3) || !strings.HasPrefix(locs[1].Key, strings.TrimSuffix(ledger.AccessKey(4, 6), ".jsonl")+"-") {
		t.Fatalf("access objects recorded: %+v; want 1-3 and 4-6 under a key of its own", locs)
	}
	b, err := h.l.WriteOnceCopy(ctx, locs[1].Key)
	if err != nil || !bytes.Contains(b, []byte("ops-oncall")) {
		t.Fatalf("the new batch's copy %s: %s, %v", locs[1].Key, b, err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "access batch put under a key of its own") {
		t.Fatalf("logs:\n%s\nwant a WARN line for the batch put elsewhere", logs)
	}
	// The reads the restore lost from the row store are in write-once
	// storage alone: fsck says where.
	if p := problems(integrity(t, h)); !strings.Contains(p, "access records 4–6 are in no batch the row store records or queues, but write-once storage holds "+ledger.AccessKey(4, 6)) ||
		strings.Count(p, "\n") != 0 {
		t.Fatalf("after the restore:\n%s\nwant one finding, of the batch of 4-6 the restore lost", p)
	}
	h.tamper(t, tamperAccess(5, `"key":"ops-oncall"`, `"key":"auditor"`))
	if p := problems(integrity(t, h)); !strings.Contains(p, "access record 5 differs from the write-once copy "+locs[1].Key) {
		t.Fatalf("findings:\n%s\nwant record 5 edited after its upload", p)
	}
}

// TestIntegrityFindsAnAccessBatchRemovedWithItsRecord: a support key's
// reads (records 4-6) removed from the row store together with the row
// store's record of their uploaded batch. No batch compared with the log
// names them, but bbolt numbers access records without gaps: fsck finds
// the numbers no batch recorded, queued or in the dead letters holds.
func TestIntegrityFindsAnAccessBatchRemovedWithItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drop     []uint64
		batch    [2]uint64
		want     string
		lastRead bool // a batch queued after the removed one
	}{
		{"inside", []uint64{4, 5, 6}, [2]uint64{4, 6}, "access records 4–6 are in no batch", true},
		{"the last", []uint64{7, 8, 9}, [2]uint64{7, 9}, "access records 7–9 are in no batch", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, log := accessHarness(t)
			reads(t, log, "auditor", 3) // 1-3
			h.drain(t)
			reads(t, log, "support-leads", 3) // 4-6
			h.drain(t)
			reads(t, log, "auditor", 3) // 7-9
			h.drain(t)
			if tc.lastRead {
				reads(t, log, "auditor", 1) // 10, queued
			}
			if p := problems(integrity(t, h)); p != "" {
				t.Fatalf("before: %s", p)
			}
			h.tamper(t, func(tx *bbolt.Tx) error {
				for _, seq := range tc.drop {
					if err := tamper.DropAccess(seq)(tx); err != nil {
						return err
					}
				}
				return tx.Bucket([]byte("object_records")).Delete([]byte(ledger.AccessKey(tc.batch[0], tc.batch[1])))
			})
			if p := problems(integrity(t, h)); !strings.Contains(p, tc.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", p, tc.want)
			}
		})
	}
}

// After a restore to an older copy the new reads go in batches of other
// numbers than those the restore lost (4-5 and 6-7, where 4-6 was put):
// no key is taken, yet fsck names the batch in write-once storage that
// holds the reads the row store no longer does. So would it a batch
// removed from the row store and replaced by others queued again.
func TestIntegrityFindsReadsARestoreLostUnderOtherNumbers(t *testing.T) {
	h, log := restoredAfterReads(t)
	reads(t, log, "ops-oncall", 2) // 4-5
	h.drain(t)
	reads(t, log, "ops-oncall", 2) // 6-7
	h.drain(t)
	want := "access records 4–6 are in no batch the row store records or queues, but write-once storage holds " + ledger.AccessKey(4, 6)
	if p := problems(integrity(t, h)); !strings.Contains(p, want) || strings.Count(p, "\n") != 0 {
		t.Fatalf("after the restore:\n%s\nwant one finding, %q", p, want)
	}
}
