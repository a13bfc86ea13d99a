package pact_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact"
)

// A grant whose record cannot be read gets no statement, and says so:
// its revocation is posted without one rather than hold up the outbox
// behind it for good. A grant the store does not hold gets none either.
func TestARevocationWhoseGrantCannotBeReadIsPostedWithoutAStatement(t *testing.T) {
	cfg := startedOnce(t, "http://p.example")
	db, err := bolt.Open(cfg.StorePath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("grants"))
		if err != nil {
			return err
		}
		return b.Put([]byte("a2agrant_DAMAGED"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	p, err := pact.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, grant := range []string{"a2agrant_DAMAGED", "a2agrant_UNKNOWN"} {
		st, err := p.RevocationStatement(grant, time.Now())
		if st != "" || err != nil {
			t.Errorf("the statement of %s: %q, %v; want none, and no error to retry on", grant, st, err)
		}
	}
	if got := logs.String(); !strings.Contains(got, "cannot sign its statement") || !strings.Contains(got, "a2agrant_DAMAGED") ||
		bytes.Count([]byte(got), []byte("cannot sign")) != 1 {
		t.Errorf("logged %q, want the damaged grant's missing statement said once", got)
	}
}
