package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// The oldest batch's record removed from the database, its records kept
// and one edited: write-once storage holds the batch, which the row store
// neither records nor queues. fsck finds it, as it finds a later
// batch's record removed (TestIntegrityFindsAnAccessBatchRemovedWithItsRecord).
func TestIntegrityFindsTheOldestAccessBatchsRecordRemovedOnPostgres(t *testing.T) {
	ctx := t.Context()
	dsn := migrated(t)
	_, a, _, _ := replicasOn(t, dsn, func(dir *localdir.Store) *localdir.Store { return dir })
	log := ledger.NewAccessLog(a.store, ledger.AccessLogConfig{})
	for _, key := range []string{"support-leads", "auditor"} { // 1-3, 4-6
		for i := range 3 {
			if err := log.Record(ctx, ledger.Access{Key: key, RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	if p := fsckProblems(t, a); p != "" {
		t.Fatalf("before: %s", p)
	}
	changed := sqlValue[int64](t, dsn, `WITH e AS (UPDATE access_log SET body = replace(convert_from(body, 'UTF8'), 'support-leads', 'auditor')::bytea WHERE seq = 2 RETURNING 1),
o AS (DELETE FROM objects WHERE key = $1 RETURNING 1) SELECT (SELECT count(*) FROM e) + (SELECT count(*) FROM o)`, ledger.AccessKey(1, 3))
	if changed != 2 {
		t.Fatalf("changed %d rows, want 2", changed)
	}
	if p := fsckProblems(t, a); !strings.Contains(p, ledger.AccessKey(1, 3)) {
		t.Fatalf("findings:\n%s\nwant one naming %s, the batch write-once storage holds of records 1-3", p, ledger.AccessKey(1, 3))
	}
}
