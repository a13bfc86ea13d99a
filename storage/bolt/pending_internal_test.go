package bolt

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// pendingModel is what the store should answer: the live rows, and the
// first live row of each request JWT.
type pendingModel struct {
	rows  map[string]*ledger.Row
	first map[string]string // request JWT hash → row id
}

// pendingRow is row i of the test: a hex id mostly, a text id now and
// then; its request JWT hex or text, shared with an earlier row's now and
// then, or sharing an earlier one's first 16 bytes.
func pendingRow(rng *rand.Rand, i int) *ledger.Row {
	r := numbersRow(fmt.Sprint("pending row ", i))
	if i%29 == 5 {
		r.ID = fmt.Sprint("text id ", i)
	}
	switch j := rng.IntN(max(i, 1)); {
	case i%13 == 7:
		r.RequestJWTSHA256 = numbersRow(fmt.Sprint("pending row ", j)).RequestJWTSHA256 // a replay of row j's
	case i%31 == 11:
		r.RequestJWTSHA256 = fmt.Sprint("text hash ", i)
	case i%37 == 17:
		// Row j's short key, another hash.
		other := sha256.Sum256(fmt.Append(nil, "other ", i))
		prefix, _ := hex.DecodeString(numbersRow(fmt.Sprint("pending row ", j)).RequestJWTSHA256)
		copy(other[:reqKeyLen], prefix)
		r.RequestJWTSHA256 = hex.EncodeToString(other[:])
	}
	return r
}

// check compares every answer of a read of s with the model: each live
// row by id and by request JWT, the removed ones absent, and the rows in
// id order.
func (m *pendingModel) check(s *Store, removed []string) error {
	return s.View(context.Background(), func(tx ledger.Tx) error {
		for id, r := range m.rows {
			got, err := tx.Row(id)
			if err != nil || got.ID != r.ID {
				return fmt.Errorf("row %s: %v", id, err)
			}
		}
		for sha, id := range m.first {
			if got, err := tx.RowByRequestJWT(sha); err != nil || got != id {
				return fmt.Errorf("request JWT %s: %q, %v; want %q", sha, got, err, id)
			}
		}
		for _, id := range removed {
			if _, live := m.rows[id]; live {
				continue
			}
			if _, err := tx.Row(id); !errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("removed row %s: %v", id, err)
			}
		}
		var want, got []string
		for id := range m.rows {
			want = append(want, string(idKey(id)))
		}
		slices.Sort(want)
		for after := ""; ; {
			page, next, err := tx.RowsByID(after, 37)
			if err != nil {
				return err
			}
			for _, r := range page {
				got = append(got, string(idKey(r.ID)))
			}
			if next == "" {
				break
			}
			after = next
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("rows by id: %d, want %d", len(got), len(want))
		}
		return nil
	})
}

// Rows created and removed in batches, with generations of a few dozen
// rows merged as they fill, a store closed while merges run and opened
// again: every read answers as the model does, and once the merges are
// done the buckets hold every key and the records only the open
// generation's.
func TestPendingKeysMerged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	cfg := Config{genRows: 40}
	s, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	m := &pendingModel{rows: map[string]*ledger.Row{}, first: map[string]string{}}
	var removed []string
	next := 0
	for round := range 60 {
		// A few writes at once, so that batches form.
		var wg sync.WaitGroup
		var made []*ledger.Row
		for range 1 + rng.IntN(4) {
			var batch []*ledger.Row
			for range 1 + rng.IntN(20) {
				batch = append(batch, pendingRow(rng, next))
				next++
			}
			made = append(made, batch...)
			wg.Go(func() {
				err := s.Update(context.Background(), func(tx ledger.Tx) error {
					for _, r := range batch {
						if err := tx.CreateRow(r); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if err := m.created(s, made); err != nil {
			t.Fatal(err)
		}
		// Remove a few rows, some of them just written.
		var gone []*ledger.Row
		for _, r := range m.rows {
			if rng.IntN(10) == 0 {
				gone = append(gone, r)
			}
		}
		update(t, s, func(tx ledger.Tx) error {
			for _, r := range gone {
				if err := tx.RemoveRow(r, ledger.Tombstone{ID: r.ID}); err != nil {
					return err
				}
			}
			return nil
		})
		for _, r := range gone {
			m.removed(r)
			removed = append(removed, r.ID)
		}
		if err := m.check(s, removed); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round%9 == 8 {
			// Closed whatever the merges are doing, and opened again.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(path, cfg); err != nil {
				t.Fatal(err)
			}
			if err := m.check(s, removed); err != nil {
				t.Fatalf("round %d, opened again: %v", round, err)
			}
		}
	}
	// The merges done: only the open generation is pending.
	deadline := time.Now().Add(30 * time.Second)
	for {
		gens := s.pending.list()
		if len(gens) == 1 && gens[0].added < cfg.genRows {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("merges not done: %d generations", len(gens))
		}
		// A write lets the commit loop start the next merge.
		update(t, s, func(ledger.Tx) error { return nil })
		runtime.Gosched()
	}
	open := map[string]bool{}
	for _, k := range s.pending.list()[0].rows.keys() {
		open[string(k)] = true
	}
	if rows, merged, failed := s.PendingKeys(); rows != len(open) || merged == 0 || failed != 0 {
		t.Errorf("PendingKeys: %d rows, %d merged, %d failed; want %d rows, merges, no failure", rows, merged, failed, len(open))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(btx *bolt.Tx) error {
		records := 0
		if err := btx.Bucket(bPending).ForEach(func(_, v []byte) error {
			rowKey, _, err := splitPendingRecord(v)
			if err != nil {
				return err
			}
			if !open[string(rowKey)] {
				return fmt.Errorf("record of %x outside the open generation", rowKey)
			}
			records++
			return nil
		}); err != nil {
			return err
		}
		if records != len(open) {
			return fmt.Errorf("%d records, want the open generation's %d", records, len(open))
		}
		inTree := 0
		for id := range m.rows {
			if v := idGet(btx.Bucket(bRowSeq), 32, idKey(id)); v != nil {
				inTree++
			} else if !open[string(idKey(id))] {
				return fmt.Errorf("row %s: neither in row_seq nor pending", id)
			}
		}
		if inTree+len(open) != len(m.rows) {
			return fmt.Errorf("%d rows in row_seq and %d pending, want %d in all", inTree, len(open), len(m.rows))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// created applies the store's rule for request JWTs to rows, in the
// order the store numbered them: a row takes its request JWT's entry when
// no live row holds it.
func (m *pendingModel) created(s *Store, rows []*ledger.Row) error {
	numbers := map[string]uint64{}
	if err := s.View(context.Background(), func(ltx ledger.Tx) error {
		for _, r := range rows {
			n := ltx.(*tx).seqOf(r.ID)
			if n == nil {
				return fmt.Errorf("row %s has no number", r.ID)
			}
			numbers[r.ID] = binary.BigEndian.Uint64(n)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(rows, func(a, b *ledger.Row) int { return cmp.Compare(numbers[a.ID], numbers[b.ID]) })
	for _, r := range rows {
		m.rows[r.ID] = r
		if _, held := m.first[r.RequestJWTSHA256]; !held {
			m.first[r.RequestJWTSHA256] = r.ID
		}
	}
	return nil
}

// removed drops row r, and its request JWT's entry when it held it.
func (m *pendingModel) removed(r *ledger.Row) {
	delete(m.rows, r.ID)
	if m.first[r.RequestJWTSHA256] == r.ID {
		delete(m.first, r.RequestJWTSHA256)
	}
}

// Reads that run while generations are merged and dropped find every
// row whose write was answered, by id and by request JWT; a row being
// written is found or not found, never an error, and listing the rows by
// id never meets a row its snapshot does not hold.
func TestPendingKeysReadWhileMerged(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{genRows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var acked []*ledger.Row
	var batchAt atomic.Int64 // the batch being written
	done := make(chan struct{})
	var readers sync.WaitGroup
	reads := make([]int, 2)
	for i := range reads {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				if len(acked) == 0 {
					mu.Unlock()
					runtime.Gosched()
					continue
				}
				r := acked[rng.IntN(len(acked))]
				mu.Unlock()
				writing := numbersRow(fmt.Sprintf("read while merged %d/%d", batchAt.Load(), rng.IntN(20)))
				if err := s.View(context.Background(), func(tx ledger.Tx) error {
					if got, err := tx.Row(r.ID); err != nil || got.ID != r.ID {
						return fmt.Errorf("row %s: %v", r.ID, err)
					}
					if got, err := tx.RowByRequestJWT(r.RequestJWTSHA256); err != nil || got != r.ID {
						return fmt.Errorf("request JWT of %s: %q, %v", r.ID, got, err)
					}
					if _, err := tx.Row(writing.ID); err != nil && !errors.Is(err, ledger.ErrNotFound) {
						return fmt.Errorf("a row being written: %v", err)
					}
					if _, err := tx.RowByRequestJWT(writing.RequestJWTSHA256); err != nil {
						return fmt.Errorf("the request JWT of a row being written: %v", err)
					}
					if rng.IntN(20) == 0 {
						for after := ""; ; {
							page, next, err := tx.RowsByID(after, 500)
							if err != nil {
								return fmt.Errorf("rows by id: %v", err)
							}
							_ = page
							if next == "" {
								break
							}
							after = next
						}
					}
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				reads[i]++
			}
		})
	}
	for i := range 150 {
		var names []string
		for j := range 20 {
			names = append(names, fmt.Sprintf("read while merged %d/%d", i, j))
		}
		batchAt.Store(int64(i))
		rows := createRows(t, s, names...)
		mu.Lock()
		acked = append(acked, rows...)
		mu.Unlock()
		if t.Failed() {
			break
		}
	}
	close(done)
	readers.Wait()
	dropped := 0
	if err := s.db.View(func(btx *bolt.Tx) error {
		dropped = btx.Bucket(bRowSeq).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if dropped == 0 || reads[0]+reads[1] == 0 {
		t.Errorf("%d keys merged into row_seq, %d reads: want both", dropped, reads[0]+reads[1])
	}
}

// Commits of thousands of rows, as a bulk load makes, leave no more
// pending than the rows of two commits: every commit carries a merge
// step of twice the keys its rows add, so a generation is merged by the
// commit after the one that closed it (with steps of a fixed size the
// pending rows would grow with every commit).
func TestPendingKeysKeepUpWithLargeCommits(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{genRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const batch, batches = 2000, 30
	most := 0
	for i := range batches {
		var names []string
		for j := range batch {
			names = append(names, fmt.Sprintf("large commit %d/%d", i, j))
		}
		createRows(t, s, names...)
		rows, _, _ := s.PendingKeys()
		most = max(most, rows)
	}
	// At most a generation of a commit's rows, and the open one filling
	// behind it, after a commit.
	if limit := 2 * batch; most > limit {
		t.Errorf("up to %d rows pending after a commit, want at most %d", most, limit)
	}
	rows, merged, _ := s.PendingKeys()
	if merged == 0 {
		t.Errorf("%d rows pending, no merge", rows)
	}
}

// A record holds its keys whatever their lengths, and a malformed one is
// refused.
func TestPendingRecord(t *testing.T) {
	for _, c := range []struct{ row, jwt []byte }{
		{make([]byte, 32), make([]byte, 16)},
		{make([]byte, 32), nil},
		{[]byte("x"), make([]byte, 32)},
		{make([]byte, 300), []byte("text hash")},
	} {
		for i := range c.row {
			c.row[i] = byte(i)
		}
		row, jwt, err := splitPendingRecord(pendingRecord(c.row, c.jwt))
		if err != nil || !slices.Equal(row, c.row) || !slices.Equal(jwt, c.jwt) && len(c.jwt)+len(jwt) > 0 {
			t.Errorf("record of a %d-byte key and a %d-byte one: %x, %x, %v", len(c.row), len(c.jwt), row, jwt, err)
		}
	}
	for _, v := range [][]byte{nil, {0}, {5, 1, 2}, {0x80}} {
		if _, _, err := splitPendingRecord(v); err == nil {
			t.Errorf("record %x: no error", v)
		}
	}
}

// reopenSettled closes s, writes the pending keys of its file at path
// into their buckets (settlePending) and opens the file again, closed
// when t ends.
func reopenSettled(t *testing.T, s *Store, path string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	editFile(t, path, settlePending)
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A read transaction that begins after a row's commit and before its
// keys join the generations (the commit loop adds them once the commit
// returns) finds the row by its id and its request JWT, as it finds it
// by its indexes and in id order; so does one after the keys joined.
func TestRowFoundBetweenItsCommitAndItsKeys(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{genRows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The commit below is made beside the commit loop, not on it, and the
	// loop registers a key filter being built between its own
	// transactions only: with the filter built at open still being built,
	// the row's keys could miss it, and the filter then answer that its
	// request JWT is absent. Wait for that filter first.
	waitFilter(t, s, func(*keyFilter) bool { return true })
	ctx := context.Background()
	before := numbersRow("committed before")
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.CreateRow(before) }); err != nil {
		t.Fatal(err)
	}
	// The commit loop's commit, stopped between the commit and its keys
	// (bbolt orders it with the commit loop's transactions).
	r := numbersRow("committed, its keys not yet in memory")
	m := newMemo(s.recent)
	if err := s.db.Update(func(btx *bolt.Tx) error {
		return (&tx{tx: btx, c: s.codec.Load(), m: m, fs: &s.filters, ids: allIDs(s.pending)}).CreateRow(r)
	}); err != nil {
		t.Fatal(err)
	}
	read := func(when string) {
		t.Helper()
		err := s.View(ctx, func(tx ledger.Tx) error {
			for _, want := range []*ledger.Row{before, r} {
				if got, err := tx.Row(want.ID); err != nil || got.ID != want.ID {
					return fmt.Errorf("row %s by id: %v", want.ID, err)
				}
				if got, err := tx.RowByRequestJWT(want.RequestJWTSHA256); err != nil || got != want.ID {
					return fmt.Errorf("row %s by its request JWT: %q, %v", want.ID, got, err)
				}
			}
			rows, _, err := tx.RowsByID("", 10)
			if err != nil || len(rows) != 2 {
				return fmt.Errorf("rows in id order: %d, %v", len(rows), err)
			}
			listed, _, err := tx.List(ledger.Query{Principal: "p", PageSize: 10})
			if err != nil || len(listed) != 2 {
				return fmt.Errorf("rows by principal: %d, %v", len(listed), err)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	read("before its keys joined")
	// The keys join on the commit loop, the one writer of the pending keys.
	if err := s.Update(ctx, func(ledger.Tx) error { m.committed(s.pending); return nil }); err != nil {
		t.Fatal(err)
	}
	read("after its keys joined")
}

// A read transaction that begins after a row's removal and before its
// keys leave the generations (the commit loop drops them once the commit
// returns) finds the row gone, as its snapshot has it: not found by its
// id or its request JWT, not in id order, and its tombstone there; so
// does one after the keys left.
func TestRowGoneBetweenItsRemovalAndItsKeys(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{genRows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	kept, gone := numbersRow("kept"), numbersRow("removed")
	if err := s.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.CreateRow(kept); err != nil {
			return err
		}
		return tx.CreateRow(gone)
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.pending.list()[0].rows.get(idKey(gone.ID)); !ok {
		t.Fatal("the removed row's key is not pending: the test reads nothing")
	}
	// The commit loop's removal, stopped between the commit and the keys.
	m := newMemo(s.recent)
	tomb := ledger.Tombstone{ID: gone.ID, SweptAt: time.Now().UTC()}
	if err := s.db.Update(func(btx *bolt.Tx) error {
		return (&tx{tx: btx, c: s.codec.Load(), m: m, fs: &s.filters, ids: allIDs(s.pending)}).RemoveRow(gone, tomb)
	}); err != nil {
		t.Fatal(err)
	}
	read := func(when string) {
		t.Helper()
		err := s.View(ctx, func(tx ledger.Tx) error {
			if _, err := tx.Row(gone.ID); !errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("the removed row by id: %v, want not found", err)
			}
			if id, err := tx.RowByRequestJWT(gone.RequestJWTSHA256); id != "" || err != nil {
				return fmt.Errorf("the removed row by its request JWT: %q, %v", id, err)
			}
			if got, err := tx.Row(kept.ID); err != nil || got.ID != kept.ID {
				return fmt.Errorf("the kept row by id: %v", err)
			}
			rows, _, err := tx.RowsByID("", 10)
			if err != nil || len(rows) != 1 || rows[0].ID != kept.ID {
				return fmt.Errorf("rows in id order: %d, %v", len(rows), err)
			}
			if tb, err := tx.Tombstone(gone.ID); err != nil || tb == nil {
				return fmt.Errorf("the removed row's tombstone: %v, %v", tb, err)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	read("before its keys left")
	if err := s.Update(ctx, func(ledger.Tx) error { m.committed(s.pending); return nil }); err != nil {
		t.Fatal(err)
	}
	read("after its keys left")
}

// A row swept and a new row reusing its request JWT in one batch: the new
// row takes the request JWT's key, and keeps it, whether the swept row's
// key was still pending in the open generation, or in a closed one whose
// merge writes its keys in that very batch. The request JWT then names
// the new row, so a third row posting it is a duplicate of that one, and
// the file never names the swept row.
func TestARequestJWTRetakenInTheBatchThatSweptIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		genRows int
		before  int // rows written before the swept one, in their own write
	}{
		{"pending in the open generation", 0, 0},
		{"merged in the same batch", 30, 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.db")
			s, err := Open(path, Config{genRows: tc.genRows})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			waitFilter(t, s, func(*keyFilter) bool { return true })
			a, b, c := numbersRow("swept "+tc.name), numbersRow("retaken "+tc.name), numbersRow("third "+tc.name)
			b.RequestJWTSHA256, c.RequestJWTSHA256 = a.RequestJWTSHA256, a.RequestJWTSHA256
			var names []string
			for i := range tc.before {
				names = append(names, fmt.Sprintf("before %d", i))
			}
			if len(names) > 0 {
				createRows(t, s, names...)
			}
			// a is written by the blocking write: with a generation of 30
			// rows it is the 30th, so the generation closes as that batch
			// commits and the next batch carries the step that writes its
			// keys into the file.
			errs := queueBehindWrite(t, s, func(tx ledger.Tx) error { return tx.CreateRow(a) },
				func(tx ledger.Tx) error { return tx.RemoveRow(a, ledger.Tombstone{ID: a.ID, SweptAt: time.Now()}) },
				func(tx ledger.Tx) error { return tx.CreateRow(b) })
			for i, err := range errs {
				if err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			firstOf := func(s *Store) string {
				t.Helper()
				var first string
				if err := s.View(context.Background(), func(tx ledger.Tx) error {
					var err error
					first, err = tx.RowByRequestJWT(a.RequestJWTSHA256)
					return err
				}); err != nil {
					t.Fatalf("the request JWT's row: %v", err)
				}
				return first
			}
			if got := firstOf(s); got != b.ID {
				t.Fatalf("the request JWT names %q after the batch, want the new row %s", got, b.ID)
			}
			if err := s.db.View(func(btx *bolt.Tx) error {
				c := (&tx{tx: btx}).cursor(bReqJWT)
				if v := idGetAt(c, reqKeyLen, reqKeys(a.RequestJWTSHA256)[0]); v != nil {
					return fmt.Errorf("the file's request JWT entry names row %x, the swept row's number or another's", v)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// What the ledger's dedupe asks before recording the third.
			var dup string
			update(t, s, func(tx ledger.Tx) error {
				var err error
				if dup, err = tx.RowByRequestJWT(c.RequestJWTSHA256); err != nil {
					return err
				}
				return tx.CreateRow(c)
			})
			if dup != b.ID {
				t.Fatalf("before the third row the request JWT names %q, want %s (the third is its duplicate)", dup, b.ID)
			}
			// Every generation merged, then the file reopened.
			for range 8 {
				update(t, s, func(ledger.Tx) error { return nil })
			}
			if got := firstOf(s); got != b.ID {
				t.Fatalf("after the merges the request JWT names %q, want %s", got, b.ID)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(path, Config{genRows: tc.genRows}); err != nil {
				t.Fatal(err)
			}
			if got := firstOf(s); got != b.ID {
				t.Fatalf("reopened, the request JWT names %q, want %s", got, b.ID)
			}
		})
	}
}
