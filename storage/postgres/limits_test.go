package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// limitReplicas opens two replicas of one fresh database and evidence
// store, verifying sc's receipts.
func limitReplicas(t *testing.T, sc *pacttest.Scenario) []replica {
	t.Helper()
	dsn := migrated(t)
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return []replica{newReplica(t, dsn, sc, objects, "replica-a"), newReplica(t, dsn, sc, objects, "replica-b")}
}

// withinLimits returns the result of a row's within_limits check.
func withinLimits(t *testing.T, r *ledger.Row) verifier.Outcome {
	t.Helper()
	for _, c := range r.Verifier.Checks {
		if c.Name == verifier.CheckWithinLimits {
			return c.Result
		}
	}
	t.Fatalf("row %s has no within_limits check", r.ID)
	return 0
}

// TestCountMaxPostedAtOnce: two receipts under one grant, each posted
// with countMax 1, at the same moment, forty times: to the two replicas
// of one database, and (every other pair) both to one replica, whose
// group commits run in several transactions at once. One row passes
// within_limits and the other fails it, as in any order of the two
// writes; never both pass.
func TestCountMaxPostedAtOnce(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	replicas := limitReplicas(t, sc)
	for i := range 40 {
		grant := fmt.Sprint("grant-", i)
		rows := make([]*ledger.Row, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j := range 2 {
			x := sc.Mint(pacttest.Spec{GrantID: grant, Target: fmt.Sprint("T-", i, "-", j)})
			to := replicas[(i%2)*j]
			wg.Go(func() {
				rows[j], _, errs[j] = to.l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT,
					DelegationToken: x.DelegationToken, Actions: x.Actions, Limits: &ledger.Limits{CountMax: 1}})
			})
		}
		wg.Wait()
		var got []verifier.Outcome
		for j, err := range errs {
			if err != nil {
				t.Fatalf("pair %d, receipt %d: %v", i, j, err)
			}
			got = append(got, withinLimits(t, rows[j]))
		}
		slices.Sort(got)
		if !slices.Equal(got, []verifier.Outcome{verifier.Pass, verifier.Fail}) {
			t.Fatalf("pair %d: within_limits %v, want one PASS and one FAIL", i, got)
		}
	}
}

// TestRepeatsPostedAtOnceOpenOneIncident: a receipt recorded, then two
// repeats of it posted at the same moment, each with limits its amount
// exceeds, twenty times: to the two replicas, and (every other pair) both
// to one. A receipt opens one incident (ledger.RefRepeatIncident): one
// repeat is an INCIDENT, the other a DUPLICATE, never two incidents.
func TestRepeatsPostedAtOnceOpenOneIncident(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	replicas := limitReplicas(t, sc)
	for i := range 20 {
		x := sc.Mint(pacttest.Spec{GrantID: fmt.Sprint("grant-", i), Target: fmt.Sprint("T-", i), ArgsJSON: fmt.Sprintf(`{"order":"T-%d","amount":10}`, i)})
		in := ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT, DelegationToken: x.DelegationToken, Actions: x.Actions}
		if _, _, err := replicas[0].l.AppendReceipt(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		rows := make([]*ledger.Row, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j := range 2 {
			repeat := in
			repeat.Limits = &ledger.Limits{AmountMax: fmt.Sprint(j + 1)}
			to := replicas[(i%2)*j]
			wg.Go(func() { rows[j], _, errs[j] = to.l.AppendReceipt(t.Context(), repeat) })
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("pair %d, repeat %d: %v", i, j, err)
			}
		}
		if a, b := rows[0].Status, rows[1].Status; a == b || (a != ledger.Incident && b != ledger.Incident) || (a != ledger.Duplicate && b != ledger.Duplicate) {
			t.Fatalf("pair %d: statuses %v and %v, want one INCIDENT and one DUPLICATE", i, a, b)
		}
	}
}

// TestCountMaxManyGrantsAtOnce: six receipts under each of six grants,
// all posted at once to two replicas, with countMax 3: the group commits
// take receipts of several grants, so a write finds its grant held by
// another replica's transaction inside a group as well as alone. Each
// grant has three rows that pass within_limits and three that fail.
func TestCountMaxManyGrantsAtOnce(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	replicas := limitReplicas(t, sc)
	type post struct {
		grant string
		in    ledger.ReceiptInput
	}
	var posts []post
	for i := range 36 {
		grant := fmt.Sprint("grant-", i%6)
		x := sc.Mint(pacttest.Spec{GrantID: grant, Target: fmt.Sprint("T-", i)})
		posts = append(posts, post{grant, ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT,
			DelegationToken: x.DelegationToken, Actions: x.Actions, Limits: &ledger.Limits{CountMax: 3}}})
	}
	before := postgres.AloneRuns()
	rows := make([]*ledger.Row, len(posts))
	errs := make([]error, len(posts))
	var wg sync.WaitGroup
	for i, p := range posts {
		wg.Go(func() { rows[i], _, errs[i] = replicas[i%2].l.AppendReceipt(t.Context(), p.in) })
	}
	wg.Wait()
	t.Logf("%d of %d writes found their grant held inside a group and ran alone", postgres.AloneRuns()-before, len(posts))
	passed, failed := map[string]int{}, map[string]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		switch withinLimits(t, rows[i]) {
		case verifier.Pass:
			passed[posts[i].grant]++
		case verifier.Fail:
			failed[posts[i].grant]++
		}
	}
	for g := range 6 {
		grant := fmt.Sprint("grant-", g)
		if passed[grant] != 3 || failed[grant] != 3 {
			t.Errorf("%s: %d rows passed within_limits and %d failed, want 3 and 3", grant, passed[grant], failed[grant])
		}
	}
}

// TestGroupMemberFindingItsGrantHeldRunsAlone: replica A holds a grant in
// an open transaction. Three writes share one group commit of replica B;
// the second holds the same grant. It does not wait inside the group
// (where it would hold the group's other writes, and could deadlock with
// a group of A's): the first and third commit without it, and it runs
// again in a transaction of its own, which waits for A's and then sees
// A's row with the others.
func TestGroupMemberFindingItsGrantHeldRunsAlone(t *testing.T) {
	b, dsn := batchStore(t)
	a := open(t, postgres.Config{DSN: dsn})
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	byHolder := row("written by the grant's holder")
	go func() {
		held <- a.Update(t.Context(), func(tx ledger.Tx) error {
			if err := tx.HoldGrants("grant-1"); err != nil {
				return err
			}
			// The hold is sent with the transaction's next read.
			if _, _, err := tx.List(ledger.Query{GrantID: "grant-1", PageSize: 1}); err != nil {
				return err
			}
			close(holding)
			// A group that waited for this hold would wait here for good:
			// the holder gives up after a deadline, and the test fails on
			// what the second write then saw.
			deadline := time.NewTimer(10 * time.Second)
			defer deadline.Stop()
			select {
			case <-release:
			case <-deadline.C:
			}
			return tx.CreateRow(byHolder)
		})
	}()
	<-holding
	before := postgres.AloneRuns()
	first, second, third := row("first of the group"), row("holds the grant"), row("third of the group")
	runs := 0
	var seen []string
	othersStored := false
	errs := inOneBatch(t, b,
		func(tx ledger.Tx) error { return receipt(tx, first) },
		func(tx ledger.Tx) error {
			runs++
			if runs == 2 {
				// On the store's goroutine: no t.Fatal here.
				n, err := storedOf(a, first.ID, third.ID)
				if err != nil {
					return err
				}
				othersStored = n == 2
				close(release)
			}
			if err := tx.HoldGrants("grant-1"); err != nil {
				return err
			}
			rows, _, err := tx.List(ledger.Query{GrantID: "grant-1", PageSize: 10})
			if err != nil {
				return err
			}
			seen = seen[:0]
			for _, r := range rows {
				seen = append(seen, r.ID)
			}
			return receipt(tx, second)
		},
		func(tx ledger.Tx) error { return receipt(tx, third) },
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d of the group: %v", i, err)
		}
	}
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if runs != 2 || !othersStored {
		t.Fatalf("the write holding the grant ran %d times (want 2: in the group, then alone), the others stored before its second run: %v", runs, othersStored)
	}
	want := []string{byHolder.ID, first.ID, third.ID}
	if slices.Sort(seen); !slices.Equal(seen, slices.Sorted(slices.Values(want))) {
		t.Errorf("alone, after the holder's hold, it saw rows %v under the grant, want %v", seen, want)
	}
	if n := postgres.AloneRuns() - before; n != 1 {
		t.Errorf("%d writes ran alone, want 1", n)
	}
}

// storedOf returns how many of ids are stored, read through s.
func storedOf(s *postgres.Store, ids ...string) (int, error) {
	n := 0
	err := s.View(context.Background(), func(tx ledger.Tx) error {
		for _, id := range ids {
			switch _, err := tx.Row(id); {
			case err == nil:
				n++
			case !errors.Is(err, ledger.ErrNotFound):
				return err
			}
		}
		return nil
	})
	return n, err
}

// TestWritesGoOnWhileAGrantIsHeld: another replica holds a grant in an
// open transaction. Six writes holding the same grant wait for it off the
// committers, more than the store has committers: a write that holds no
// grant, sent after them, commits while the grant is still held, and the
// six commit once it is released.
func TestWritesGoOnWhileAGrantIsHeld(t *testing.T) {
	dsn := migrated(t)
	a, b := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn, Committers: 4})
	holding, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	t.Cleanup(let) // before the stores close, whatever failed
	held := make(chan error, 1)
	go func() {
		held <- a.Update(t.Context(), func(tx ledger.Tx) error {
			if err := tx.HoldGrants("hot"); err != nil {
				return err
			}
			// The hold is sent with the transaction's next round trip.
			if _, _, err := tx.List(ledger.Query{GrantID: "hot", PageSize: 1}); err != nil {
				return err
			}
			once.Do(func() { close(holding) })
			<-release
			return nil
		})
	}()
	<-holding
	before := postgres.AloneRuns()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			errs[i] = b.Update(t.Context(), func(tx ledger.Tx) error {
				if err := tx.HoldGrants("hot"); err != nil {
					return err
				}
				r := row(fmt.Sprint("under the held grant ", i))
				r.GrantID = "hot"
				return tx.CreateRow(r)
			})
		})
	}
	poll(t, "the six writes wait for the grant", 10*time.Second, func() bool { return postgres.AloneRuns()-before == int64(len(errs)) })
	cold := make(chan error, 1)
	go func() {
		cold <- b.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(row("under no grant")) })
	}()
	// The write under no grant must not wait for the hold; if it does, the
	// holder is let go after a deadline and the test fails.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	select {
	case err := <-cold:
		if err != nil {
			t.Errorf("the write under no grant: %v", err)
		}
	case <-deadline.C:
		t.Errorf("the write under no grant waited for the held grant")
	}
	let()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d under the held grant: %v", i, err)
		}
	}
	if n, err := storedOf(b, row("under the held grant 5").ID, row("under no grant").ID); err != nil || n != 2 {
		t.Errorf("%d of the rows stored, %v", n, err)
	}
}
