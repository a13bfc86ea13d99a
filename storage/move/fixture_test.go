package move_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// fixture is a ledger kept in a bbolt file with records of every kind,
// and what a ledger over another store needs to answer as it did: the
// same signers, evidence directory, log key and clock.
type fixture struct {
	sc       *pacttest.Scenario
	dir      string
	path     string // the bbolt file
	signer   note.Signer
	vkey     string
	mu       sync.Mutex
	now      time.Time
	rows     []string // rows still stored
	swept    []string // rows swept (tombstones)
	targets  []string
	grants   []string
	users    []string
	counters bolt.Counters // the file's sequences
	queued   int           // its outbox entries
	// repeated is a receipt whose repeat opened its incident.
	repeated *pacttest.Receipt
}

// clock is the ledgers' clock.
func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// ledgerOn returns a ledger over store with the fixture's keys, evidence
// directory, clock and log.
func (f *fixture) ledgerOn(t *testing.T, store ledger.Store) *ledger.Ledger {
	t.Helper()
	objects, err := localdir.Open(filepath.Join(f.dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), f.sc.Brands(), f.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: f.sc.Audience, CheckedBy: "pactledger test"})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Now: f.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.EnableLog(ledger.LogConfig{Signer: f.signer}); err != nil {
		t.Fatal(err)
	}
	return l
}

// newFixture writes a ledger with records of every kind into a bbolt
// file: rows of two retention classes with evidence, a resubmission, a
// dispute, a revoked grant, a closed and an open incident, a sweep that
// left tombstones and deletions, uploaded segments and snapshots, a
// dispute drill report, read-access records, the Merkle log with
// published tiles and queued leaves, and an outbox holding entries, a
// failure record, a segment plan and a dead letter. The file is closed.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)}
	t.Cleanup(f.sc.Close)
	f.path = filepath.Join(f.dir, "ledger.db")
	var err error
	if f.signer, f.vkey, err = pacttest.LogKey("ledger.test/move"); err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(f.path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l := f.ledgerOn(t, store)
	ctx := t.Context()

	// Rows: money moved (18 months) and read-only (90 days), spread over
	// principals, grants and targets.
	for i := range 30 {
		f.post(t, l, pacttest.Spec{Target: "M-" + strconv.Itoa(i%12), GrantID: "grant-" + strconv.Itoa(i%4), User: "user-" + strconv.Itoa(i%3)})
	}
	var readOnly []string
	for i := range 10 {
		readOnly = append(readOnly, f.post(t, l, pacttest.Spec{Target: "R-" + strconv.Itoa(i), Tool: "get_order", ScopesUsed: []string{"orders:read"}, GrantID: "grant-ro", User: "user-9"}))
	}
	f.targets = []string{"M-0", "M-5", "R-3", "X-1"}
	f.grants = []string{"grant-0", "grant-3", "grant-ro"}
	f.users = []string{"user-1", "user-9"}
	// A resubmission of the first receipt records nothing new.
	first := f.sc.Mint(pacttest.Spec{Target: "dup", GrantID: "grant-1"})
	f.postReceipt(t, l, first)
	if _, o, err := l.AppendReceipt(ctx, input(first)); err != nil || o != ledger.AlreadyRecorded {
		t.Fatalf("resubmission: %v, %v", o, err)
	}
	// Scopes beyond the grant: incident INC-1, on an action of the day
	// before (a closed incident still holds its day's rows for 12 months).
	f.post(t, l, pacttest.Spec{Target: "X-1", ScopesUsed: []string{"orders:cancel", "orders:refund"}, At: f.clock().Add(-24 * time.Hour)})
	if _, err := l.RevokeGrant(ctx, "grant-3", time.Time{}, "customer asked", "support@example.com", false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendDispute(ctx, f.rows[0], ledger.DisputeOpen, "not me", "support@example.com"); err != nil {
		t.Fatal(err)
	}
	f.integrate(t, l)
	f.drain(t, l)
	if err := l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := drill.New(l, drill.Config{Now: f.clock}).Run(ctx, drill.Request{Target: "M-1"}, "auditor@example.com"); err != nil {
		t.Fatal(err)
	}
	incs, _, err := l.Incidents(ctx, 10, "")
	if err != nil || len(incs) != 1 {
		t.Fatalf("incidents: %d, %v", len(incs), err)
	}
	if _, err := l.CloseIncident(ctx, incs[0].ID, "contained", "admin@example.com"); err != nil {
		t.Fatal(err)
	}
	f.integrate(t, l)
	f.drain(t, l)

	// 100 days on, the read-only rows are swept.
	f.advance(100 * 24 * time.Hour)
	res, err := l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swept) != len(readOnly) {
		t.Fatalf("swept %d rows, want the %d read-only ones: %+v", len(res.Swept), len(readOnly), res)
	}
	f.swept = readOnly
	f.rows = without(f.rows, readOnly)

	// A second incident, opened now and left open, and rows not yet
	// uploaded or integrated.
	at := f.clock().Add(-time.Second)
	f.post(t, l, pacttest.Spec{Target: "X-2", At: at, ScopesUsed: []string{"orders:cancel", "orders:refund"}})
	for i := range 6 {
		f.post(t, l, pacttest.Spec{Target: "N-" + strconv.Itoa(i), At: at, GrantID: "grant-new"})
	}
	// A repeat of the first receipt beside args its hash does not match:
	// INC-3, the one incident its repeats may open
	// (ledger.RefRepeatIncident).
	repeat := input(first)
	repeat.Actions = []verifier.Action{{Tool: first.Actions[0].Tool, Target: "dup", ArgsJSON: `{"order":"dup","amount":1}`}}
	row, o, err := l.AppendReceipt(ctx, repeat)
	if err != nil || o != ledger.DuplicateRecorded || row.Status != ledger.Incident {
		t.Fatalf("repeat: %v, %v, %v", o, err, row)
	}
	f.rows = append(f.rows, row.ID)
	f.repeated = first
	f.outboxKinds(t, store)
	for i := range 3 {
		err := store.Update(ctx, func(tx ledger.Tx) error {
			_, err := tx.AppendAccess(f.clock().Add(time.Duration(i)*time.Second), fmt.Appendf(nil, `{"read":"row %d"}`, i))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// without returns ids less those in drop.
func without(ids, drop []string) []string {
	gone := map[string]bool{}
	for _, id := range drop {
		gone[id] = true
	}
	var out []string
	for _, id := range ids {
		if !gone[id] {
			out = append(out, id)
		}
	}
	return out
}

func input(r *pacttest.Receipt) ledger.ReceiptInput {
	return ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}
}

// post records a new receipt minted per sp and returns its row id.
func (f *fixture) post(t *testing.T, l *ledger.Ledger, sp pacttest.Spec) string {
	t.Helper()
	return f.postReceipt(t, l, f.sc.Mint(sp))
}

func (f *fixture) postReceipt(t *testing.T, l *ledger.Ledger, r *pacttest.Receipt) string {
	t.Helper()
	row, o, err := l.AppendReceipt(t.Context(), input(r))
	if err != nil || o != ledger.Created {
		t.Fatalf("AppendReceipt: %v, %v", o, err)
	}
	f.rows = append(f.rows, row.ID)
	return row.ID
}

// integrate extends the log over every queued leaf.
func (f *fixture) integrate(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	if _, err := l.Integrate(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// drain uploads the outbox until it is empty.
func (f *fixture) drain(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	for range 20 {
		n, err := l.OutboxDepth(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if _, err := l.UploadRound(t.Context(), 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the outbox did not drain")
}

// outboxKinds leaves in the outbox what an uploader in trouble leaves: a
// counted failure, a segment planned and not recorded as put, and an
// entry moved to the dead letters.
func (f *fixture) outboxKinds(t *testing.T, store ledger.Store) {
	t.Helper()
	err := store.Update(t.Context(), func(tx ledger.Tx) error {
		es, err := tx.Outbox(10)
		if err != nil {
			return err
		}
		if len(es) < 4 {
			return fmt.Errorf("%d outbox entries, want at least 4", len(es))
		}
		if err := ledger.MoveToDeadLetters(tx, es[0], "a different object holds the key", f.clock()); err != nil {
			return err
		}
		if _, err := ledger.CountFailure(tx, es[1].Seq, "503 Slow Down", f.clock()); err != nil {
			return err
		}
		// An object whose deletion waits for its retention to pass.
		if err := tx.QueueDeletion(ledger.Location{Store: "dir", Key: "objects/retained-" + strconv.FormatUint(es[0].Seq, 10), RetainUntil: f.clock().Add(time.Hour), Uploaded: true}); err != nil {
			return err
		}
		day := es[2].RetainUntil.UTC().Truncate(24 * time.Hour)
		return tx.PlanSegment(ledger.SegmentPlan{Key: ledger.SegmentKey(day, es[2].Seq, es[3].Seq), RetainUntil: day.Add(24 * time.Hour), Entries: es[2:4]})
	})
	if err != nil {
		t.Fatal(err)
	}
}
