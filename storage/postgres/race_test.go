package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
)

// A receipt and its other ES256 encoding posted at once to two replicas
// are one signed receipt: one first row and one duplicate, as when they
// come one after the other, with or without a request JWT, and with the
// same one or another of the agent's.
func TestTwinReceiptsAtOnceOnTwoReplicas(t *testing.T) {
	for _, requestJWT := range []string{"none", "the same", "another"} {
		t.Run(requestJWT, func(t *testing.T) {
			sc, a, b, _ := replicasOver(t, func(dir *localdir.Store) *localdir.Store { return dir })
			replicas := []replica{a, b}
			for i := range 30 {
				r := sc.Mint(pacttest.Spec{Target: fmt.Sprint("T-", i)})
				ins := []ledger.ReceiptInput{
					{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions},
					{ReceiptJWS: pacttest.MalleateES256(r.ReceiptJWS), RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions},
				}
				switch requestJWT {
				case "none":
					ins[0].RequestJWT, ins[1].RequestJWT = "", ""
				case "another":
					ins[1].RequestJWT = sc.Mint(pacttest.Spec{Target: fmt.Sprint("T-", i)}).RequestJWT
				}
				rows := make([]*ledger.Row, 2)
				errs := make([]error, 2)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for j := range ins {
					wg.Go(func() {
						<-start
						rows[j], _, errs[j] = replicas[(i+j)%2].l.AppendReceipt(t.Context(), ins[j])
					})
				}
				close(start)
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatalf("pair %d: %v", i, err)
				}
				first, dup := rows[0], rows[1]
				if first.Verifier.DuplicateOf != "" {
					first, dup = dup, first
				}
				if first.Verifier.DuplicateOf != "" || dup.Verifier.DuplicateOf != first.ID {
					t.Fatalf("pair %d: rows %s (duplicate of %q) and %s (duplicate of %q), want one first row and its duplicate",
						i, rows[0].ID[:12], rows[0].Verifier.DuplicateOf, rows[1].ID[:12], rows[1].Verifier.DuplicateOf)
				}
			}
		})
	}
}

// A row is swept while two writers on two replicas, each posting a new
// receipt with its request JWT, have read the request JWT's entry naming
// it: each then finds the row gone and records a first use. One of them
// must run again and be found the other's duplicate, as when they come
// one after the other.
func TestRequestJWTReusedWhileItsRowIsSwept(t *testing.T) {
	dsn := migrated(t)
	sweeper := open(t, postgres.Config{DSN: dsn})
	writers := []*postgres.Store{open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})}
	ctx := t.Context()
	sha := hexID("a request JWT")
	old := row("swept")
	old.RequestJWTSHA256 = sha
	if err := sweeper.Update(ctx, func(tx ledger.Tx) error { return tx.CreateRow(old) }); err != nil {
		t.Fatal(err)
	}
	removed, commit := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var once sync.Once
		if err := sweeper.Update(ctx, func(tx ledger.Tx) error {
			if err := tx.RemoveRow(old, ledger.Tombstone{ID: old.ID}); err != nil {
				return err
			}
			if _, err := tx.Tombstone(old.ID); err != nil { // sends the removal
				return err
			}
			once.Do(func() { close(removed); <-commit })
			return nil
		}); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	<-removed
	// Each writer reads the entry, still committed, then waits for the
	// sweep when it reads the row; the ledger's dedupe by request JWT.
	rows := []*ledger.Row{row("new a"), row("new b")}
	for i, s := range writers {
		rows[i].RequestJWTSHA256 = sha
		wg.Go(func() {
			if err := s.Update(ctx, func(tx ledger.Tx) error {
				r := rows[i]
				r.Verifier.DuplicateOf = ""
				first, err := tx.RowByRequestJWT(sha)
				if err != nil {
					return err
				}
				if first != "" {
					switch _, err := tx.Row(first); {
					case err == nil:
						r.Verifier.DuplicateOf = first
					case !errors.Is(err, ledger.ErrNotFound):
						return err
					}
				}
				return tx.CreateRow(r)
			}); err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	// Both wait on the swept row's lock before the sweep commits.
	for deadline := time.Now().Add(20 * time.Second); sqlValue[int64](t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") < 2; {
		if time.Now().After(deadline) {
			close(commit)
			t.Fatal("the writers did not wait on the swept row")
		}
	}
	close(commit)
	wg.Wait()
	a, b := rows[0].Verifier.DuplicateOf, rows[1].Verifier.DuplicateOf
	if (a == "") == (b == "") || a != "" && a != rows[1].ID || b != "" && b != rows[0].ID {
		t.Fatalf("rows a and b are duplicates of %q and %q: want one first use of the request JWT and its duplicate", a, b)
	}
	firstUse := rows[0]
	if a != "" {
		firstUse = rows[1]
	}
	if owner := sqlValue[string](t, dsn, "SELECT row_id FROM request_jwts WHERE sha = $1", sha); owner != firstUse.ID {
		t.Fatalf("the request JWT's entry names %s, want the first use %s", owner, firstUse.ID)
	}
}

// heldHolds is write-once storage whose first legal-hold call waits until
// released, as a slow S3 round trip would; it records the calls in the
// order applied.
type heldHolds struct {
	ledger.ObjectStore
	entered, release chan struct{}
	mu               sync.Mutex
	calls            []bool
}

func (s *heldHolds) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) error {
	s.mu.Lock()
	first := s.entered != nil
	entered := s.entered
	s.entered = nil
	s.mu.Unlock()
	if first {
		close(entered)
		<-s.release
	}
	s.mu.Lock()
	s.calls = append(s.calls, on)
	s.mu.Unlock()
	return s.ObjectStore.SetLegalHold(ctx, loc, on)
}

// Operations on one object keep their order across replicas: while one
// replica's uploader applies the first (a hold, for an incident opened),
// another's round does not take the second (its release) ahead of it.
func TestOperationsOnOneObjectKeepTheirOrderAcrossReplicas(t *testing.T) {
	for _, ops := range [][2]string{{ledger.OpHold, ledger.OpRelease}, {ledger.OpRelease, ledger.OpHold}} {
		t.Run(ops[0]+" then "+ops[1], func(t *testing.T) {
			_, a, b, objects := replicasOver(t, func(dir *localdir.Store) *heldHolds {
				return &heldHolds{ObjectStore: dir, entered: make(chan struct{}), release: make(chan struct{})}
			})
			ctx := t.Context()
			const key = "rows/held.json"
			loc, err := objects.ObjectStore.Put(ctx, key, []byte("{}"), time.Now().Add(48*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.store.Update(ctx, func(tx ledger.Tx) error {
				if err := tx.SetObject(key, loc); err != nil {
					return err
				}
				for _, op := range ops {
					if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: "held", Key: key, Op: op}, time.Now()); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			entered := objects.entered
			done := make(chan error, 1)
			go func() { _, err := a.l.UploadRound(ctx, 1, 1); done <- err }()
			<-entered // replica a applies the first operation, slowly
			if _, err := b.l.UploadRound(ctx, 1, 1); err != nil {
				t.Fatal(err)
			}
			close(objects.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := b.l.UploadRound(ctx, 1, 1); err != nil {
				t.Fatal(err)
			}
			want := []bool{ops[0] == ledger.OpHold, ops[1] == ledger.OpHold}
			var rec ledger.Location
			if err := a.store.View(ctx, func(tx ledger.Tx) error {
				var err error
				rec, err = tx.Object(key)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(objects.calls, want) || rec.LegalHold != want[1] {
				t.Fatalf("legal holds applied %v, recorded %v: want %v, in the order queued", objects.calls, rec.LegalHold, want)
			}
		})
	}
}
