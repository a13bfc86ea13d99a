package bolt

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Request-JWT hashes that meet on their keys: a and b share their first
// 16 bytes; textSHA is 15 characters, whose layout-6 key (its marker and
// text) is 16 bytes long, and shaT's first 16 bytes are that key.
var (
	sharedPrefix = strings.Repeat("ab", 16)
	shaA         = sharedPrefix + strings.Repeat("01", 16)
	shaB         = sharedPrefix + strings.Repeat("02", 16)
	shaC         = strings.Repeat("cd", 32)
	textSHA      = "fifteen-letters"
	shaT         = "ff" + hex.EncodeToString([]byte(textSHA)) + strings.Repeat("03", 16)
)

func reqRow(name, sha string) *ledger.Row {
	r := numbersRow(name)
	r.RequestJWTSHA256 = sha
	return r
}

// wantRequestJWTs checks that every lookup in want finds the row named
// (the empty string: none), in a read and in a write.
func wantRequestJWTs(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	check := func(tx ledger.Tx) error {
		for sha, id := range want {
			got, err := tx.RowByRequestJWT(sha)
			if err != nil || got != id {
				return fmt.Errorf("request JWT %s: %q, %v; want %q", sha, got, err, id)
			}
		}
		return nil
	}
	if err := s.View(context.Background(), check); err != nil {
		t.Error(err)
	}
	if err := s.Update(context.Background(), check); err != nil {
		t.Error(err)
	}
}

// keyLengths counts bReqJWT's keys by length, those within runs and
// those pending too.
func keyLengths(t *testing.T, s *Store) map[int]int {
	t.Helper()
	n := map[int]int{}
	if err := s.db.View(func(btx *bbolt.Tx) error {
		for k := range (&tx{tx: btx, ids: allIDs(s.pending)}).idEntries(bReqJWT, nil) {
			n[len(k)]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// update runs fn in a write of s; an error fails t.
func update(t *testing.T, s *Store, fn func(ledger.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// Two request JWTs whose hashes share their short key are both found,
// the second under its whole hash; removing the first leaves the second
// found, and frees the short key for the next. A text hash and a hex hash
// whose first 16 bytes are the text's old key do not meet. A lookup reads
// a long key through a key filter built from the file.
func TestRequestJWTsSharingAShortKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	a, b, tr, ht := reqRow("a", shaA), reqRow("b", shaB), reqRow("text", textSHA), reqRow("hex after text", shaT)
	update(t, s, func(txn ledger.Tx) error { return txn.CreateRow(a) })
	update(t, s, func(txn ledger.Tx) error {
		for _, r := range []*ledger.Row{b, tr, ht} {
			if err := txn.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	// A later row with b's request JWT: b stays its first.
	update(t, s, func(txn ledger.Tx) error { return txn.CreateRow(reqRow("b again", shaB)) })
	wantRequestJWTs(t, s, map[string]string{shaA: a.ID, shaB: b.ID, textSHA: tr.ID, shaT: ht.ID, shaC: ""})
	if got := keyLengths(t, s); got[16] != 2 || got[32] != 1 || got[17] != 1 || len(got) != 3 {
		t.Errorf("key lengths %v, want two short keys, one long (b), one text", got)
	}

	update(t, s, func(txn ledger.Tx) error { return txn.RemoveRow(a, ledger.Tombstone{ID: a.ID}) })
	wantRequestJWTs(t, s, map[string]string{shaA: "", shaB: b.ID})

	// A filter built from the file holds b's long key by its short one.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Config{}); err != nil {
		t.Fatal(err)
	}
	waitFilter(t, s, func(*keyFilter) bool { return true })
	wantRequestJWTs(t, s, map[string]string{shaA: "", shaB: b.ID, textSHA: tr.ID, shaT: ht.ID})

	a2 := reqRow("a2", shaA)
	update(t, s, func(txn ledger.Tx) error { return txn.CreateRow(a2) })
	wantRequestJWTs(t, s, map[string]string{shaA: a2.ID, shaB: b.ID})
	update(t, s, func(txn ledger.Tx) error { return txn.RemoveRow(b, ledger.Tombstone{ID: b.ID}) })
	wantRequestJWTs(t, s, map[string]string{shaA: a2.ID, shaB: ""})
	if got := keyLengths(t, s); got[32] != 0 {
		t.Errorf("key lengths %v after b's row went, want no long key", got)
	}
}

// A layout-6 file (every hex hash under its 32 bytes, a 15-character text
// hash under 16) is brought to layout 7: one of two hashes sharing a
// short key keeps its long key, the text gets its 17th byte, and every
// lookup finds its row.
func TestLayout6RequestJWTKeysShorten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	rows := []*ledger.Row{reqRow("a", shaA), reqRow("b", shaB), reqRow("c", shaC), reqRow("text", textSHA), reqRow("hex after text", shaT)}
	update(t, s, func(txn ledger.Tx) error {
		for _, r := range rows {
			if err := txn.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	editFile(t, path, func(btx *bbolt.Tx) error {
		if _, err := Layout8IDs(btx); err != nil {
			return err
		}
		b := btx.Bucket(bReqJWT)
		seqs := map[string][]byte{}
		for _, r := range rows {
			for _, k := range reqKeys(r.RequestJWTSHA256) {
				if v := b.Get(k); v != nil && seqs[string(v)] == nil {
					seqs[string(v)] = idKey(r.RequestJWTSHA256)
					if err := b.Delete(k); err != nil {
						return err
					}
					break
				}
			}
		}
		if len(seqs) != len(rows) {
			return fmt.Errorf("%d request-JWT entries found, want %d", len(seqs), len(rows))
		}
		for v, k := range seqs {
			if err := b.Put(k, []byte(v)); err != nil {
				return err
			}
		}
		return btx.Bucket(bMeta).Put(kLayout, u64(6))
	})
	if s, err = Open(path, Config{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]string{}
	for _, r := range rows {
		want[r.RequestJWTSHA256] = r.ID
	}
	wantRequestJWTs(t, s, want)
	waitFilter(t, s, func(*keyFilter) bool { return true })
	wantRequestJWTs(t, s, want)
	if got := keyLengths(t, s); got[16] != 3 || got[32] != 1 || got[17] != 1 || len(got) != 3 {
		t.Errorf("key lengths %v after the conversion, want three short keys, one long, one text", got)
	}
}
