package move_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMove moves a bbolt ledger holding records of every kind into an
// empty PostgreSQL database, interrupting the copy twice (in the rows and
// in the log); each run continues where the last stopped, the finished
// move verifies, a run after it writes nothing, and a ledger on the
// database answers every question as the one on the file did. Its log
// then grows from the old checkpoint with a consistency proof, and new
// incidents, outbox entries and access records are numbered after the
// old ones.
func TestMove(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	f.counters, f.queued = checkEveryKind(t, f.path)

	store, err := bolt.Open(f.path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	before := capture(t, f, f.ledgerOn(t, store), store)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	var cp string
	if err := json.Unmarshal([]byte(before["checkpoint"]), &cp); err != nil {
		t.Fatal(err)
	}
	oldCP := []byte(cp)

	dsn := pgtest.CreateDB(t)
	var out bytes.Buffer
	cfg := move.Config{From: f.path, To: postgres.Config{DSN: dsn}, Chunk: 5, Progress: &out}

	// Interrupted in the rows, then in the log's stored hashes.
	for _, stopIn := range []bolt.ExportKind{bolt.ExportRows, bolt.ExportLogHashes} {
		ctx, cancel := context.WithCancel(t.Context())
		cfg.OnChunk = func(k bolt.ExportKind, copied int64) {
			if k == stopIn && copied >= 10 {
				cancel()
			}
		}
		rep, err := move.Run(ctx, cfg)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run interrupted in %s: %v, want context.Canceled\n%s", stopIn, err, out.String())
		}
		if rep == nil || rep.Copied == 0 {
			t.Fatalf("run interrupted in %s copied nothing", stopIn)
		}
		t.Logf("interrupted in %s after %d records", stopIn, rep.Copied)
	}
	if n := count(t, dsn, "ledger_rows"); n != len(f.rows) {
		t.Fatalf("%d rows in the database after the interrupted runs, want all %d (the rows were done before the log)", n, len(f.rows))
	}

	cfg.OnChunk = nil
	out.Reset()
	rep, err := move.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out.String())
	}
	if !rep.Resumed || rep.AlreadyMoved || rep.Copied == 0 {
		t.Errorf("resumed run: %+v", rep)
	}
	checkReport(t, rep)
	if !strings.Contains(out.String(), "continuing after the") || !strings.Contains(out.String(), "move verified") {
		t.Errorf("progress of the resumed run does not say it continued and verified:\n%s", out.String())
	}
	t.Logf("resumed run:\n%s", out.String())

	out.Reset()
	again, err := move.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("run after the move: %v\n%s", err, out.String())
	}
	if !again.AlreadyMoved || again.Copied != 0 {
		t.Errorf("run after the move: %+v, want AlreadyMoved and nothing copied", again)
	}
	for i := range again.Checks {
		if again.Checks[i] != rep.Checks[i] {
			t.Errorf("run after the move: %+v, was %+v", again.Checks[i], rep.Checks[i])
		}
	}

	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	l := f.ledgerOn(t, pg)
	compare(t, before, capture(t, f, l, pg))
	checkGrowth(t, f, l, pg, oldCP)
}

// checkEveryKind fails t unless the fixture's file holds records of every
// kind a move copies, so that the test covers each.
func checkEveryKind(t *testing.T, path string) (bolt.Counters, int) {
	t.Helper()
	ex, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	for _, k := range bolt.ExportKinds {
		recs, err := ex.Records(k, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Errorf("the fixture has no %s", k)
		}
	}
	c, err := ex.Counters()
	if err != nil || c.Outbox == 0 || c.Incident == 0 || c.Access == 0 || c.Leaf == 0 {
		t.Errorf("counters %+v, %v: want every one used", c, err)
	}
	queued, err := ex.Records(bolt.ExportOutbox, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return c, len(queued)
}

// checkReport fails t unless every check of rep agrees and counts
// something.
func checkReport(t *testing.T, rep *move.Report) {
	t.Helper()
	for _, c := range rep.Checks {
		if !c.Equal() || c.Source == 0 {
			t.Errorf("check %+v", c)
		}
	}
	if len(rep.Checks) < len(bolt.ExportKinds)+2 {
		t.Errorf("%d checks, want one per kind and table and one for the sequences", len(rep.Checks))
	}
}

// checkGrowth writes on the moved ledger: the log integrates the leaves
// queued before the move, and its new checkpoint is consistent with the
// old one; old proofs still verify against the old checkpoint; new
// incidents, outbox entries and access records are numbered after the
// old ones.
func checkGrowth(t *testing.T, f *fixture, l *ledger.Ledger, store ledger.Store, oldCP []byte) {
	t.Helper()
	ctx := t.Context()
	old, err := proof.Open(oldCP, f.vkey)
	if err != nil {
		t.Fatalf("old checkpoint: %v", err)
	}
	p, err := l.Proof(ctx, f.rows[0])
	if err != nil {
		t.Fatal(err)
	}
	if c, err := p.Verify(f.vkey); err != nil || c != old {
		t.Errorf("proof of %s from the moved ledger: %v (checkpoint %d, want the old %d)", f.rows[0], err, c.Size, old.Size)
	}
	// The receipt whose repeat opened its incident opens none again: the
	// count under its key moved too.
	again := input(f.repeated)
	again.Actions = []verifier.Action{{Tool: f.repeated.Actions[0].Tool, Target: "dup", ArgsJSON: `{"order":"dup","amount":2}`}}
	if row, _, err := l.AppendReceipt(ctx, again); err != nil {
		t.Errorf("a failing repeat on the moved ledger: %v", err)
	} else if row.Status != ledger.Duplicate {
		t.Errorf("a failing repeat of a receipt whose repeat opened its incident, on the moved ledger: %v %s; want DUPLICATE", row.Status, row.IncidentID)
	}
	at := f.clock().Add(-time.Second)
	id := f.post(t, l, pacttest.Spec{Target: "X-3", At: at, ScopesUsed: []string{"orders:cancel", "orders:refund"}})
	if _, err := l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The log is served as far as it is published, as the integrator
	// publishes after each round.
	if err := l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	path, oldSigned, newSigned, err := l.Consistency(ctx, old.Size, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(oldSigned, oldCP) {
		t.Errorf("the moved ledger's checkpoint at size %d differs from the old one", old.Size)
	}
	newer, err := proof.Open(newSigned, f.vkey)
	if err != nil {
		t.Fatal(err)
	}
	if newer.Size <= old.Size {
		t.Errorf("tree size %d after new writes, want above %d", newer.Size, old.Size)
	}
	if err := proof.VerifyConsistency(old, newer, path); err != nil {
		t.Errorf("consistency from the old checkpoint: %v", err)
	}
	if p, err := l.Proof(ctx, id); err != nil {
		t.Errorf("proof of a new row: %v", err)
	} else if _, err := p.Verify(f.vkey); err != nil {
		t.Errorf("proof of a new row: %v", err)
	}
	incs, _, err := l.Incidents(ctx, 1, "")
	if err != nil || len(incs) != 1 || incs[0].ID != "INC-4" {
		t.Errorf("newest incident after the move: %+v, %v; want INC-4", incs, err)
	}
	err = store.Update(ctx, func(tx ledger.Tx) error {
		seq, err := tx.AppendAccess(f.clock(), []byte(`{}`))
		if err == nil && seq != 4 {
			t.Errorf("access record after the move: seq %d, want 4", seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var queued []ledger.OutboxEntry
	if err := store.View(ctx, func(tx ledger.Tx) error { queued, err = tx.Outbox(1000); return err }); err != nil {
		t.Fatal(err)
	}
	fresh := 0
	for _, e := range queued {
		if e.Seq > f.counters.Outbox {
			fresh++
		}
	}
	if fresh == 0 || len(queued) != f.queued+fresh {
		t.Errorf("outbox after a write on the moved ledger: %d entries, %d numbered after the old sequence's %d; want the %d old ones and new ones after them",
			len(queued), fresh, f.counters.Outbox, f.queued)
	}
}

// count returns the rows of table in the database at dsn.
func count(t *testing.T, dsn, table string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMoveRefuses: a move refuses a file a ledgerd has open, a database
// that already holds ledger data, and a database holding a move from
// another file; a move of a file written to after the move began (the
// mark of the move cleared, then a ledgerd's write) is refused too.
func TestMoveRefuses(t *testing.T) {
	pgtest.Available(t)
	dir := t.TempDir()
	small := func(name string) string {
		path := dir + "/" + name + ".db"
		s, err := bolt.Open(path, bolt.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-07T13:00:00Z-"+name, []byte(`{}`)) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := small("a"), small("b")
	dsn := pgtest.CreateDB(t)
	run := func(from string) error {
		_, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}, LockTimeout: 200 * time.Millisecond})
		return err
	}

	open, err := bolt.Open(a, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(a); !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("move of a file in use: %v, want ErrLocked", err)
	}
	if err := open.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-08T00:00:00Z-a", []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	if err := run(a); err != nil {
		t.Fatalf("move: %v", err)
	}
	if err := run(b); !errors.Is(err, move.ErrOtherSource) {
		t.Errorf("move of another file into the moved database: %v, want ErrOtherSource", err)
	}
	// The moved file is refused to ledgerd until the way back clears
	// its mark; a ledgerd then writes to it.
	if s, err := bolt.Open(a, bolt.Config{}); !errors.Is(err, bolt.ErrMoved) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("open of the moved file: %v, want ErrMoved", err)
	}
	if _, err := bolt.ClearMoved(a, time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := bolt.Open(a, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-10T00:00:00Z-a", []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := run(a); !errors.Is(err, move.ErrOtherSource) {
		t.Errorf("move of the file after a ledgerd wrote to it: %v, want ErrOtherSource", err)
	}

	other := pgtest.CreateDB(t)
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: other}); err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: other})
	if err != nil {
		t.Fatal(err)
	}
	err = pg.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-09T00:00:00Z-live", []byte(`{}`)) })
	pg.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := move.Run(t.Context(), move.Config{From: b, To: postgres.Config{DSN: other}}); !errors.Is(err, move.ErrNotEmpty) {
		t.Errorf("move into a database with ledger data: %v, want ErrNotEmpty", err)
	}
}
