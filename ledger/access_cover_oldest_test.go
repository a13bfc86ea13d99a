package ledger_test

import (
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// The oldest batch's record removed from the row store, and its records
// kept but edited: the records are in no batch, though the access log
// numbered them after it was anchored (a batch of later records names the
// numbers that came before). fsck finds it as it finds the removal of
// any later batch's record.
func TestIntegrityFindsTheOldestAccessBatchsRecordRemoved(t *testing.T) {
	h, log := accessHarness(t)
	reads(t, log, "support-leads", 3) // 1-3
	h.drain(t)
	reads(t, log, "auditor", 3) // 4-6
	h.drain(t)
	fsckClean(t, h, "before")
	h.tamper(t, func(tx *bbolt.Tx) error {
		if err := tamperAccess(2, `"key":"support-leads"`, `"key":"auditor"`)(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte("object_records")).Delete([]byte(ledger.AccessKey(1, 3)))
	})
	if p := problems(integrity(t, h)); !strings.Contains(p, "access records 1–3") {
		t.Fatalf("findings:\n%s\nwant records 1-3 in no batch (record 2 was edited after its batch was put)", p)
	}
}
