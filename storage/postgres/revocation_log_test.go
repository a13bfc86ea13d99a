package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// On PostgreSQL as on bbolt, fsck lists the row store's revocations and
// finds a logged one deleted from the database.
func TestIntegrityFindsARevocationDeletedOnPostgres(t *testing.T) {
	w := newWorld(t)
	r := w.replica(t, "a")
	ctx := t.Context()
	signer, _, err := pacttest.LogKey("ledger.test/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	const grant = "a2agrant_pg"
	if _, err := r.l.RevokeGrant(ctx, grant, time.Now().Add(-time.Hour), "stolen laptop", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.RevokeGrant(ctx, "a2agrant_kept", time.Time{}, "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	fsck := func() string {
		t.Helper()
		p, err := r.l.CheckIntegrity(ctx, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range p.Findings {
			out = append(out, f.Problem)
		}
		return strings.Join(out, "\n")
	}
	if got := fsck(); got != "" {
		t.Fatalf("clean ledger: %s", got)
	}
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DELETE FROM revocations WHERE grant_id = $1", grant); err != nil {
		t.Fatal(err)
	}
	if got := fsck(); !strings.Contains(got, "the row store holds no revocation of that grant") || strings.Count(got, "\n") != 0 {
		t.Fatalf("findings:\n%s\nwant one, of the revocation deleted", got)
	}
}
