package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// inOneBatch runs fns as Update calls of store s (one committer) that
// share one group commit, in the order given: a first Update holds the
// committer until every fn's Update waits behind it. It returns each
// Update's result.
func inOneBatch(t *testing.T, s *postgres.Store, fns ...func(ledger.Tx) error) []error {
	t.Helper()
	running, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Update(t.Context(), func(ledger.Tx) error {
			select {
			case <-running:
			default:
				close(running)
			}
			<-release
			return nil
		})
	}()
	<-running
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = s.Update(t.Context(), fn) })
		poll(t, fmt.Sprintf("Update %d waits for the group commit", i), 10*time.Second, func() bool { return postgres.Waiting(s) == i+1 })
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatalf("the Update that held the committer: %v", err)
	}
	return errs
}

// batchStore opens a store on a fresh database with one committer, whose
// batches take every waiting Update.
func batchStore(t *testing.T) (*postgres.Store, string) {
	dsn := migrated(t)
	return open(t, postgres.Config{DSN: dsn, Committers: 1, MaxBatch: 64}), dsn
}

// receipt is what the ledger writes for a receipt: the row, its queued
// leaf, its evidence bundle and its outbox entry.
func receipt(tx ledger.Tx, r *ledger.Row) error {
	if err := tx.CreateRow(r); err != nil {
		return err
	}
	if err := tx.QueueLeaf(r.ID, []byte("leaf "+r.ID)); err != nil {
		return err
	}
	if err := tx.PutEvidence(r.ID, []byte("bundle "+r.ID)); err != nil {
		return err
	}
	return tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: r.ID, Key: ledger.EvidenceKey(r.ID)}, time.Unix(1, 0))
}

// newReceipt is a receipt member as the ledger's: it reads the row and
// the request-JWT entry ahead, then one by one, and records a duplicate of the row that
// used the request JWT first.
func newReceipt(r *ledger.Row, runs *atomic.Int32) func(ledger.Tx) error {
	return func(tx ledger.Tx) error {
		if runs != nil {
			runs.Add(1)
		}
		ahead := ledger.Prefetch{Rows: []string{r.ID}}
		if r.RequestJWTSHA256 != "" {
			ahead.RequestJWTs = []string{r.RequestJWTSHA256}
		}
		if err := tx.(ledger.Prefetcher).Prefetch(ahead); err != nil {
			return err
		}
		if _, err := tx.Row(r.ID); err == nil {
			return errSeen
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		w := *r
		if w.RequestJWTSHA256 != "" {
			first, err := tx.RowByRequestJWT(w.RequestJWTSHA256)
			if err != nil {
				return err
			}
			if first != "" {
				w.Verifier.DuplicateOf, w.Status = first, ledger.Duplicate
			}
		}
		return receipt(tx, &w)
	}
}

// written reads, in the order they were queued, the refs of the outbox
// entries and of the queued leaves, and the ids of the rows.
func written(t *testing.T, s *postgres.Store) (entries, leaves, rows []string) {
	t.Helper()
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		es, err := tx.Outbox(1000)
		if err != nil {
			return err
		}
		for _, e := range es {
			entries = append(entries, e.Ref)
		}
		ls, err := tx.PendingLeaves(1000)
		if err != nil {
			return err
		}
		for _, l := range ls {
			leaves = append(leaves, l.Ref)
		}
		rs, _, err := tx.RowsByID("", 1000)
		for _, r := range rs {
			rows = append(rows, r.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return entries, leaves, rows
}

// TestGroupWritesTogether: the receipts of one batch are written together
// under the group's savepoint (their records share one inserting
// transaction id, xmin, where writes under each member's savepoint had
// one a member), in the members' order.
func TestGroupWritesTogether(t *testing.T) {
	s, dsn := batchStore(t)
	rows := make([]*ledger.Row, 8)
	fns := make([]func(ledger.Tx) error, len(rows))
	for i := range rows {
		rows[i] = row(fmt.Sprintf("receipt %d", i))
		rows[i].RequestJWTSHA256 = hexID(fmt.Sprintf("request %d", i))
		rows[i].Actions = []verifier.RowAction{{Tool: "orders.get", Target: fmt.Sprintf("order-%d", i)}}
		rows[i].BrandKey.JWKSSnapshot = "brand-snapshot"
		fns[i] = newReceipt(rows[i], nil)
	}
	for i, err := range inOneBatch(t, s, fns...) {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
	for _, table := range []string{"ledger_rows", "row_targets", "row_snapshots", "request_jwts", "evidence", "outbox", "log_pending"} {
		if n := sqlValue[int](t, dsn, "SELECT count(*) FROM "+table); n != len(rows) {
			t.Errorf("%s: %d records, want %d", table, n, len(rows))
		}
		if n := sqlValue[int](t, dsn, "SELECT count(DISTINCT xmin::text) FROM "+table); n != 1 {
			t.Errorf("%s: written under %d transaction ids, want 1 (the batch's writes together)", table, n)
		}
	}
	var want []string
	for _, r := range rows {
		want = append(want, r.ID)
	}
	entries, leaves, _ := written(t, s)
	if !slices.Equal(entries, want) || !slices.Equal(leaves, want) {
		t.Errorf("outbox entries %v and leaves %v, want both in the members' order %v", entries, leaves, want)
	}
}

// TestGroupMemberLosesRace: inside one batch, one member's row and
// another member's request-JWT entry are stored by another replica
// between the member's read and the batch's write. Each of the two runs
// again and answers as the ledger does (the row already recorded; a
// duplicate of the other replica's row); none of the first run's writes
// persist, and the other members' writes do.
func TestGroupMemberLosesRace(t *testing.T) {
	s, dsn := batchStore(t)
	other := open(t, postgres.Config{DSN: dsn})
	rows := make([]*ledger.Row, 5)
	for i := range rows {
		rows[i] = row(fmt.Sprintf("receipt %d", i))
		rows[i].RequestJWTSHA256 = hexID(fmt.Sprintf("request %d", i))
	}
	theirs := *rows[2]
	theirs.Principal = "the other replica"
	sameJWT := row("the other replica's receipt")
	sameJWT.RequestJWTSHA256 = rows[3].RequestJWTSHA256
	var runs [5]atomic.Int32
	racedBy := func(i int, w *ledger.Row) func(ledger.Tx) error {
		return func(tx ledger.Tx) error {
			err := newReceipt(rows[i], &runs[i])(tx)
			if err == nil && runs[i].Load() == 1 {
				// The other replica commits while this batch is open.
				err = other.Update(t.Context(), func(tx ledger.Tx) error { return receipt(tx, w) })
			}
			return err
		}
	}
	errs := inOneBatch(t, s, newReceipt(rows[0], &runs[0]), newReceipt(rows[1], &runs[1]), racedBy(2, &theirs), racedBy(3, sameJWT), newReceipt(rows[4], &runs[4]))
	for i, err := range errs {
		switch {
		case i == 2 && !errors.Is(err, errSeen):
			t.Errorf("member 2: %v, want its fn to run again and see the other replica's row", err)
		case i != 2 && err != nil:
			t.Errorf("member %d: %v", i, err)
		}
	}
	for i := range runs {
		want := int32(1)
		if i == 2 || i == 3 {
			want = 2
		}
		if n := runs[i].Load(); n != want {
			t.Errorf("member %d's fn ran %d times, want %d", i, n, want)
		}
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		got, err := tx.Row(rows[2].ID)
		if err != nil {
			return err
		}
		if got.Principal != theirs.Principal {
			t.Errorf("row 2 stored by %q, want the other replica's", got.Principal)
		}
		got, err = tx.Row(rows[3].ID)
		if err != nil {
			return err
		}
		if got.Verifier.DuplicateOf != sameJWT.ID || got.Status != ledger.Duplicate {
			t.Errorf("row 3: duplicate of %q, status %s; want a duplicate of the other replica's %s", got.Verifier.DuplicateOf, got.Status, sameJWT.ID)
		}
		first, err := tx.RowByRequestJWT(sameJWT.RequestJWTSHA256)
		if err == nil && first != sameJWT.ID {
			t.Errorf("the request-JWT index names %s, want the other replica's row %s", first, sameJWT.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Every row's writes once: the five rows, the other replica's second
	// row, and nothing of the two lost runs.
	want := []string{rows[0].ID, rows[1].ID, rows[2].ID, rows[3].ID, rows[4].ID, sameJWT.ID}
	slices.Sort(want)
	entries, leaves, ids := written(t, s)
	for what, got := range map[string][]string{"outbox entries": entries, "queued leaves": leaves, "rows": ids} {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s of %v, want one of each of %v", what, got, want)
		}
	}
	if n := sqlValue[int](t, dsn, "SELECT count(*) FROM evidence"); n != len(want) {
		t.Errorf("%d evidence bundles, want %d", n, len(want))
	}
}

// errMember is what a failing member returns.
var errMember = errors.New("this member fails")

// TestGroupFailingMembers: in one batch, a member that fails after its
// writes and a member whose row the database refuses (text that is not
// UTF-8, which fails the batch's statement) each fail alone: nothing of
// theirs persists, everything of the others does, in order.
func TestGroupFailingMembers(t *testing.T) {
	s, _ := batchStore(t)
	rows := make([]*ledger.Row, 5)
	fns := make([]func(ledger.Tx) error, len(rows))
	for i := range rows {
		rows[i] = row(fmt.Sprintf("receipt %d", i))
		fns[i] = newReceipt(rows[i], nil)
	}
	fns[1] = func(tx ledger.Tx) error {
		if err := newReceipt(rows[1], nil)(tx); err != nil {
			return err
		}
		return errMember
	}
	rows[2].Principal = "not UTF-8: \xff"
	errs := inOneBatch(t, s, fns...)
	for i, err := range errs {
		switch {
		case i == 1 && !errors.Is(err, errMember):
			t.Errorf("member 1: %v, want its own error", err)
		case i == 2 && err == nil:
			t.Errorf("member 2: its row was stored, want the database's refusal")
		case i != 1 && i != 2 && err != nil:
			t.Errorf("member %d: %v", i, err)
		}
	}
	want := []string{rows[0].ID, rows[3].ID, rows[4].ID}
	entries, leaves, ids := written(t, s)
	if !slices.Equal(entries, want) || !slices.Equal(leaves, want) {
		t.Errorf("outbox entries %v and leaves %v, want %v", entries, leaves, want)
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
}

// TestGroupSharedRequestJWT: members of one batch whose receipts share a
// request JWT, each reading ahead as the ledger does: the first holds the
// index, every later one sees it and records a duplicate of it, and none
// needs a second run.
func TestGroupSharedRequestJWT(t *testing.T) {
	s, _ := batchStore(t)
	sha := hexID("one request JWT")
	rows := make([]*ledger.Row, 5)
	fns := make([]func(ledger.Tx) error, len(rows))
	var runs [5]atomic.Int32
	for i := range rows {
		rows[i] = row(fmt.Sprintf("receipt %d", i))
		rows[i].RequestJWTSHA256 = sha
		fns[i] = newReceipt(rows[i], &runs[i])
	}
	for i, err := range inOneBatch(t, s, fns...) {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
		if n := runs[i].Load(); n != 1 {
			t.Errorf("member %d's fn ran %d times, want once", i, n)
		}
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil {
			return err
		}
		if first != rows[0].ID {
			t.Errorf("the index names %s, want the first member's row %s", first, rows[0].ID)
		}
		for i, r := range rows {
			got, err := tx.Row(r.ID)
			if err != nil {
				return err
			}
			want := ""
			if i > 0 {
				want = rows[0].ID
			}
			if got.Verifier.DuplicateOf != want {
				t.Errorf("row %d: duplicate of %q, want %q", i, got.Verifier.DuplicateOf, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Members that create rows naming one request JWT without reading the
	// index share one statement: the first one's row holds the entry, as
	// one create after the other would leave it.
	blind := make([]func(ledger.Tx) error, 4)
	blindRows := make([]*ledger.Row, len(blind))
	other := hexID("another request JWT")
	for i := range blind {
		blindRows[i] = row(fmt.Sprintf("blind receipt %d", i))
		blindRows[i].RequestJWTSHA256 = other
		blind[i] = func(tx ledger.Tx) error { return receipt(tx, blindRows[i]) }
	}
	for i, err := range inOneBatch(t, s, blind...) {
		if err != nil {
			t.Errorf("blind member %d: %v", i, err)
		}
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		first, err := tx.RowByRequestJWT(other)
		if err == nil && first != blindRows[0].ID {
			t.Errorf("the index names %s, want the first blind member's row %s", first, blindRows[0].ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupReadsSeeEarlierMembers: a member reads what earlier members of
// its batch wrote, whether the read is its first statement or comes after
// others (then it runs again once their writes are sent): the rows, by id
// and listed, the evidence, the outbox and the queued leaves.
func TestGroupReadsSeeEarlierMembers(t *testing.T) {
	s, _ := batchStore(t)
	a, b := row("receipt a"), row("receipt b")
	a.RequestJWTSHA256 = hexID("request a")
	reader := func(first func(ledger.Tx) error) func(ledger.Tx) error {
		return func(tx ledger.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			if _, err := tx.Row(a.ID); err != nil {
				return fmt.Errorf("row: %w", err)
			}
			if sha, err := tx.RowByRequestJWT(a.RequestJWTSHA256); err != nil || sha != a.ID {
				return fmt.Errorf("request JWT: %q, %v", sha, err)
			}
			if _, err := tx.Evidence(a.ID); err != nil {
				return fmt.Errorf("evidence: %w", err)
			}
			listed, _, err := tx.List(ledger.Query{PageSize: 10})
			if err != nil || len(listed) == 0 {
				return fmt.Errorf("list: %d rows, %v", len(listed), err)
			}
			es, err := tx.Outbox(10)
			if err != nil || len(es) == 0 {
				return fmt.Errorf("outbox: %d entries, %v", len(es), err)
			}
			ls, err := tx.PendingLeaves(10)
			if err != nil || len(ls) == 0 {
				return fmt.Errorf("leaves: %d, %v", len(ls), err)
			}
			return nil
		}
	}
	listFirst := reader(func(tx ledger.Tx) error { _, _, err := tx.List(ledger.Query{PageSize: 1}); return err })
	// A read of something else is sent first: the member has begun when
	// it meets the earlier member's writes.
	otherFirst := reader(func(tx ledger.Tx) error {
		_, err := tx.Tombstone(b.ID)
		if !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("tombstone: %v", err)
		}
		return nil
	})
	errs := inOneBatch(t, s, func(tx ledger.Tx) error { return receipt(tx, a) }, listFirst,
		func(tx ledger.Tx) error { return receipt(tx, b) }, otherFirst)
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
}

// TestSequenceLeavesTogether: the leaves an integration round sequences
// are stored together, with their hashes and ref index, and leave the
// queue; a round in which one index is taken stores
// none of its leaves.
func TestSequenceLeavesTogether(t *testing.T) {
	s, dsn := batchStore(t)
	queue := func(refs ...string) {
		if err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for _, ref := range refs {
				if err := tx.QueueLeaf(ref, []byte("leaf "+ref)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// sequence stores the queued leaves from index at, giving each one
	// made-up hash.
	sequence := func(at ...int64) error {
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			pend, err := tx.PendingLeaves(10)
			if err != nil {
				return err
			}
			for i, p := range pend {
				var h tlog.Hash
				h[0] = byte(at[i])
				if err := tx.SequenceLeaf(p, at[i], 1000+at[i], []tlog.Hash{h}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	queue("a", "b", "c")
	if err := sequence(0, 1, 2); err != nil {
		t.Fatalf("sequence three leaves: %v", err)
	}
	for _, table := range []string{"log_leaves", "log_hashes", "log_index"} {
		if n := sqlValue[int](t, dsn, "SELECT count(*) FROM "+table); n != 3 {
			t.Errorf("%s: %d records, want 3", table, n)
		}
		if n := sqlValue[int](t, dsn, "SELECT count(DISTINCT xmin::text) FROM "+table); n != 1 {
			t.Errorf("%s: written under %d transaction ids, want 1 (one statement for the round)", table, n)
		}
	}
	if n := sqlValue[int](t, dsn, "SELECT count(*) FROM log_pending"); n != 0 {
		t.Errorf("%d leaves still queued, want none", n)
	}
	queue("d", "e")
	if err := sequence(3, 1); err == nil {
		t.Fatalf("a round with a taken index succeeded")
	}
	if n := sqlValue[int](t, dsn, "SELECT count(*) FROM log_leaves"); n != 3 {
		t.Errorf("%d leaves stored after the refused round, want the 3 before", n)
	}
	if n := sqlValue[int](t, dsn, "SELECT count(*) FROM log_pending"); n != 2 {
		t.Errorf("%d leaves queued after the refused round, want both still queued", n)
	}
}

// TestGroupSnapshots: in one batch, a snapshot a member stored is not new
// to the members after it, which read the retain-until it set; once a
// member deletes it, the next one stores it again as new; a snapshot
// stored by a member that then fails is new again to the next one.
func TestGroupSnapshots(t *testing.T) {
	s, _ := batchStore(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	one := verifier.NewSnapshot("https://brand.example/jwks", at, []byte(`{"keys":[1]}`))
	two := verifier.NewSnapshot("https://agent.example/jwks", at, []byte(`{"keys":[2]}`))
	retain := at.Add(365 * 24 * time.Hour)
	n := 0
	put := func(snap verifier.Snapshot, wantNew bool, wantRetain time.Time) func(ledger.Tx) error {
		n++
		r := row(fmt.Sprintf("receipt %d", n))
		return func(tx ledger.Tx) error {
			isNew, err := tx.PutSnapshot(snap)
			if err != nil {
				return err
			}
			if isNew != wantNew {
				return fmt.Errorf("PutSnapshot %s: new %v, want %v", snap.URI, isNew, wantNew)
			}
			got, err := tx.SnapshotRetain(snap.ID)
			if err != nil {
				return err
			}
			if !got.Equal(wantRetain) {
				return fmt.Errorf("SnapshotRetain %s: %v, want %v", snap.URI, got, wantRetain)
			}
			return receipt(tx, r)
		}
	}
	errs := inOneBatch(t, s,
		func(tx ledger.Tx) error {
			if err := put(one, true, time.Time{})(tx); err != nil {
				return err
			}
			return tx.SetSnapshotRetain(one.ID, retain)
		},
		put(one, false, retain),
		put(one, false, retain),
		func(tx ledger.Tx) error { return tx.DeleteSnapshot(one.ID) },
		put(one, true, time.Time{}),
		func(tx ledger.Tx) error {
			if err := put(two, true, time.Time{})(tx); err != nil {
				return err
			}
			return errMember
		},
		put(two, true, time.Time{}),
		put(two, false, time.Time{}),
	)
	for i, err := range errs {
		switch {
		case i == 5 && !errors.Is(err, errMember):
			t.Errorf("member 5: %v, want its own error", err)
		case i != 5 && err != nil:
			t.Errorf("member %d: %v", i, err)
		}
	}
}
