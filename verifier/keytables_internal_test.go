package verifier

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"math/big"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pactledger/pactledger/verifier/p256"
)

// signed returns a signature of hash by key with its verdict's inputs.
func signed(t *testing.T, key *ecdsa.PrivateKey, msg string) (hash []byte, r, s *big.Int) {
	t.Helper()
	sum := sha256.Sum256([]byte(msg))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return sum[:], r, s
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A key gets its table once it has verified k.after signatures, not for
// signatures that fail, and its verdicts stay crypto/ecdsa's through the
// table: good signatures, their high-s twins, wrong hashes, another key's
// signatures.
func TestKeyTableAfterEnoughSignatures(t *testing.T) {
	k := newKeyTables(8, 4, 1000, nil)
	key, other := newKey(t), newKey(t)
	pub := &key.PublicKey
	for i := range 20 {
		hash, r, s := signed(t, other, fmt.Sprint("other ", i))
		if k.verify(pub, hash, r, s) {
			t.Fatal("another key's signature verified")
		}
	}
	if k.has(pub) {
		t.Fatal("a key got a table from signatures that failed")
	}
	for i := range 8 {
		if k.has(pub) {
			t.Fatalf("a table after %d signatures, want %d", i, 8)
		}
		hash, r, s := signed(t, key, fmt.Sprint("turn ", i))
		if !k.verify(pub, hash, r, s) {
			t.Fatal("a good signature failed")
		}
	}
	if !k.has(pub) {
		t.Fatal("no table after 8 signatures")
	}
	order := elliptic.P256().Params().N
	for i := range 50 {
		hash, r, s := signed(t, key, fmt.Sprint("checked ", i))
		bad := append([]byte(nil), hash...)
		bad[i%32] ^= 1
		oh, or, os := signed(t, other, fmt.Sprint("checked ", i))
		for _, c := range []struct {
			what    string
			hash    []byte
			r, s    *big.Int
			verdict bool
		}{
			{"good", hash, r, s, true},
			{"high-s twin", hash, r, new(big.Int).Sub(order, s), true},
			{"wrong hash", bad, r, s, false},
			{"s + n", hash, r, new(big.Int).Add(s, order), false},
			{"another key's", oh, or, os, false},
		} {
			if got := k.verify(pub, c.hash, c.r, c.s); got != c.verdict || got != ecdsa.Verify(pub, c.hash, c.r, c.s) {
				t.Fatalf("%s signature: %v, want %v", c.what, got, c.verdict)
			}
		}
	}
}

// A table that refuses a signature crypto/ecdsa accepts does not decide:
// here key a's entry holds key b's table, and a's signatures still verify.
func TestKeyTableRefusalCheckedAgain(t *testing.T) {
	k := newKeyTables(1, 4, 1000, nil)
	a, b := newKey(t), newKey(t)
	wrong, err := p256.NewTable(&b.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := idOf(&a.PublicKey)
	k.tables[id] = &keyTable{table: wrong}
	hash, r, s := signed(t, a, "a")
	if wrong.Verify(hash, r, s) {
		t.Fatal("b's table verified a's signature")
	}
	if !k.verify(&a.PublicKey, hash, r, s) {
		t.Fatal("a's signature failed when its table refused it")
	}
}

// use verifies n good signatures of key through k.
func use(t *testing.T, k *keyTables, key *ecdsa.PrivateKey, n int) {
	t.Helper()
	for i := range n {
		hash, r, s := signed(t, key, fmt.Sprint(i))
		if !k.verify(&key.PublicKey, hash, r, s) {
			t.Fatal("a good signature failed")
		}
	}
}

// No more than k.max tables are kept, and they go to the keys that
// verified the most signatures: a key without a table replaces the kept
// one with the fewest only with more than it, not as many.
func TestKeyTablesGoToTheKeysThatSignMost(t *testing.T) {
	keys := []*ecdsa.PrivateKey{newKey(t), newKey(t), newKey(t), newKey(t), newKey(t)}
	for round := range 4 { // the key with the fewest is a different one each round
		k := newKeyTables(2, 4, 1000, nil)
		least := keys[round]
		for _, key := range keys[:4] {
			if key == least {
				use(t, k, key, 10)
			} else {
				use(t, k, key, 11)
			}
		}
		use(t, k, keys[4], 10) // as many as the least: not more
		if k.has(&keys[4].PublicKey) || len(k.tables) != 4 {
			t.Fatalf("a key with no more signatures than the least took a table: %d tables", len(k.tables))
		}
		use(t, k, keys[4], 2) // 12 against 10 and 11
		if !k.has(&keys[4].PublicKey) || k.has(&least.PublicKey) || len(k.tables) != 4 {
			t.Fatalf("round %d: the table replaced was not the one with the fewest signatures", round)
		}
	}
}

// A key's signatures count over the current window and the one before
// only: one signing 10 a window never outscores one signing 15 a window.
func TestKeyTableCountsOnlyTwoWindows(t *testing.T) {
	k := newKeyTables(2, 1, 100, nil)
	busy, slow, other := newKey(t), newKey(t), newKey(t)
	for range 6 {
		use(t, k, busy, 15)
		use(t, k, slow, 10)
		for i := range 75 {
			hash, r, s := signed(t, other, fmt.Sprint(i))
			if k.verify(&slow.PublicKey, hash, r, s) {
				t.Fatal("another key's signature verified")
			}
		}
		if k.has(&slow.PublicKey) {
			t.Fatal("signatures older than two windows counted")
		}
	}
}

// Signatures that fail add nothing to a key's score, through its table
// or not.
func TestFailedSignaturesScoreNothing(t *testing.T) {
	k := newKeyTables(2, 1, 1000, nil)
	a, b, c := newKey(t), newKey(t), newKey(t)
	use(t, k, a, 4)
	for i := range 50 {
		hash, r, s := signed(t, c, fmt.Sprint(i))
		if k.verify(&a.PublicKey, hash, r, s) || k.verify(&b.PublicKey, hash, r, s) {
			t.Fatal("another key's signature verified")
		}
	}
	if !k.has(&a.PublicKey) || k.has(&b.PublicKey) {
		t.Fatal("failed signatures took a's table for b")
	}
	use(t, k, b, 6) // 6 against a's 4
	if !k.has(&b.PublicKey) || k.has(&a.PublicKey) {
		t.Fatal("failed signatures kept a's table or counted for b")
	}
}

// A key that stops signing loses its score within two windows: a key
// signing at a fifth of its old rate then takes its table.
func TestKeyTableScoresFallIdle(t *testing.T) {
	k := newKeyTables(4, 1, 100, nil)
	old, next, other := newKey(t), newKey(t), newKey(t)
	window := func() { // 20 of next's signatures and 80 that fail
		t.Helper()
		use(t, k, next, 20)
		for i := range 80 {
			hash, r, s := signed(t, other, fmt.Sprint(i))
			if k.verify(&next.PublicKey, hash, r, s) {
				t.Fatal("another key's signature verified")
			}
		}
	}
	use(t, k, old, 90)
	window()
	if k.has(&next.PublicKey) || !k.has(&old.PublicKey) {
		t.Fatal("a key with fewer signatures took the table")
	}
	window()
	if !k.has(&next.PublicKey) || k.has(&old.PublicKey) {
		t.Fatal("the idle key kept its table")
	}
}

// One table is made at a time: a key that reaches its count while another
// table is being made asks again k.after signatures later.
func TestOneTableMadeAtATime(t *testing.T) {
	k := newKeyTables(3, 4, 1000, nil)
	a := newKey(t)
	k.making = true
	use(t, k, a, 3)
	if k.has(&a.PublicKey) {
		t.Fatal("a table was made while another was being made")
	}
	k.making = false
	use(t, k, a, 2)
	if k.has(&a.PublicKey) {
		t.Fatal("a table was made before the next count")
	}
	use(t, k, a, 1)
	if !k.has(&a.PublicKey) {
		t.Fatal("no table at the next count")
	}
}

// Through the verifier: the signing key of a token checked often gets a
// table, and the token's verdict is go-jose's before and after.
func TestVerifierKeepsATableForAFrequentKey(t *testing.T) {
	kept := signingKeyTables.Load()
	SetKeyTables(DefaultKeyTables, nil)
	t.Cleanup(func() { signingKeyTables.Store(kept) })
	f := newES256Fixture(t)
	const header = `{"alg":"ES256","kid":"a"}`
	bad := sign(t, f.b, header, `{"n":0}`)
	for i := range tableAfter + 2 {
		tok := sign(t, f.a, header, fmt.Sprintf(`{"n":%d}`, i))
		if _, _, _, err := verifyCompact(tok, f.ks); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if !signingKeyTables.Load().has(&f.a.PublicKey) {
		t.Fatal("no table for a key that signed every token")
	}
	sameAsGoJose(t, sign(t, f.a, header, `{"n":"after"}`), f.ks)
	sameAsGoJose(t, bad, f.ks)
	tok := sign(t, f.a, header, `{"n":"twin"}`)
	sig := sigOf(t, tok)
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s).FillBytes(sig[32:])
	sameAsGoJose(t, withSig(tok, sig), f.ks)
}

// Many goroutines verifying at once under several keys, with tables made
// and replaced meanwhile, get crypto/ecdsa's verdicts, and the tables
// stay within their bound (run with -race to check the locking too).
func TestKeyTablesAtOnce(t *testing.T) {
	k := newKeyTables(4, 2, 50, nil)
	type check struct {
		pub  *ecdsa.PublicKey
		hash []byte
		r, s *big.Int
		want bool
	}
	var checks []check
	keys := []*ecdsa.PrivateKey{newKey(t), newKey(t), newKey(t), newKey(t)}
	for i, key := range keys {
		for j := range 30 {
			hash, r, s := signed(t, key, fmt.Sprint(i, j))
			checks = append(checks, check{&key.PublicKey, hash, r, s, true})
			other := keys[(i+1)%len(keys)]
			checks = append(checks, check{&other.PublicKey, hash, r, s, false})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range checks {
				c := checks[(i*7+g*31)%len(checks)]
				if got := k.verify(c.pub, c.hash, c.r, c.s); got != c.want {
					errs <- fmt.Sprintf("goroutine %d, check %d: %v, want %v", g, i, got, c.want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if len(k.tables) == 0 || len(k.tables) > 2 || k.making {
		t.Fatalf("%d tables (bound 2), one being made: %v", len(k.tables), k.making)
	}
}

// With the tables turned off no key gets one, and verdicts are unchanged.
func TestKeyTablesTurnedOff(t *testing.T) {
	kept := signingKeyTables.Load()
	SetKeyTables(0, nil)
	t.Cleanup(func() { signingKeyTables.Store(kept) })
	key := newKey(t)
	for i := range tableAfter + 2 {
		hash, r, s := signed(t, key, fmt.Sprint(i))
		if !verifyP256(&key.PublicKey, hash, r, s) {
			t.Fatal("a good signature failed")
		}
		hash[0] ^= 1
		if verifyP256(&key.PublicKey, hash, r, s) {
			t.Fatal("a wrong hash verified")
		}
	}
	if signingKeyTables.Load() != nil {
		t.Fatal("tables kept while turned off")
	}
	SetKeyTables(MaxKeyTables+1, nil)
	if k := signingKeyTables.Load(); k == nil || k.max != MaxKeyTables {
		t.Fatal("more tables than MaxKeyTables allowed")
	}
}

// The keys counted towards a table stay within maxCountedKeys however many
// keys sign.
func TestCountedKeysBounded(t *testing.T) {
	k := newKeyTables(2, 1, 1<<40, nil)
	for i := range maxCountedKeys + 50 {
		key := newKey(t)
		hash, r, s := signed(t, key, fmt.Sprint(i))
		if !k.verify(&key.PublicKey, hash, r, s) {
			t.Fatal("a good signature failed")
		}
		if len(k.counts) > maxCountedKeys {
			t.Fatalf("%d keys counted, bound %d", len(k.counts), maxCountedKeys)
		}
	}
}

// The metrics count the tables made, replaced and kept, and the checks
// through a table by verdict.
func TestKeyTableMetrics(t *testing.T) {
	m := NewKeyTableMetrics(prometheus.NewRegistry())
	k := newKeyTables(2, 1, 1000, m)
	a, b := newKey(t), newKey(t)
	want := func(what string, c prometheus.Collector, v float64) {
		t.Helper()
		if got := testutil.ToFloat64(c); got != v {
			t.Errorf("%s: %v, want %v", what, got, v)
		}
	}
	use(t, k, a, 2)
	want("tables", m.tables, 1)
	want("made", m.made, 1)
	use(t, k, a, 3)
	hash, r, s := signed(t, a, "wrong hash")
	hash[0] ^= 1
	if k.verify(&a.PublicKey, hash, r, s) {
		t.Fatal("a wrong hash verified")
	}
	want("accepted", m.accepted, 3)
	want("refused", m.refused, 1)
	use(t, k, b, 6) // 6 against a's 5
	if !k.has(&b.PublicKey) {
		t.Fatal("b did not take a's table")
	}
	want("tables", m.tables, 1)
	want("made", m.made, 2)
	want("replaced", m.replaced, 1)
	want("failures", m.failed, 0)
	kept := signingKeyTables.Load()
	t.Cleanup(func() { signingKeyTables.Store(kept) })
	SetKeyTables(0, m)
	want("tables after turning them off", m.tables, 0)
}

// A table that could not be made, its self-check failing, is not kept:
// the key's signatures are checked by crypto/ecdsa, the failure is
// counted, and the key asks again k.after signatures later.
func TestKeyTableNotMadeIsNotKept(t *testing.T) {
	m := NewKeyTableMetrics(prometheus.NewRegistry())
	k := newKeyTables(2, 4, 1000, m)
	k.newTable = func(*ecdsa.PublicKey) (*p256.Table, error) {
		return nil, fmt.Errorf("p256: the table's product differs from nistec's")
	}
	a := newKey(t)
	use(t, k, a, 4)
	if k.has(&a.PublicKey) || k.making {
		t.Fatalf("a table that failed was kept (%v) or is still being made (%v)", k.has(&a.PublicKey), k.making)
	}
	if got := testutil.ToFloat64(m.failed); got != 2 {
		t.Fatalf("%v failures counted, want 2", got)
	}
	k.newTable = p256.NewTable
	use(t, k, a, 2)
	if !k.has(&a.PublicKey) {
		t.Fatal("no table at the next count once tables could be made")
	}
}

// The room is looked at again once the table is made: a kept table whose
// score rose meanwhile past the new key's stays, and the new one is
// dropped.
func TestKeyTableRoomCheckedAgainWhenMade(t *testing.T) {
	k := newKeyTables(2, 1, 1000, nil)
	a, b := newKey(t), newKey(t)
	use(t, k, a, 2)
	use(t, k, b, 2) // 2 against a's 2: no room
	idA, _ := idOf(&a.PublicKey)
	k.newTable = func(pub *ecdsa.PublicKey) (*p256.Table, error) {
		k.mu.RLock()
		k.tables[idA].hits.Add(10) // a signs on while b's table is made
		k.mu.RUnlock()
		return p256.NewTable(pub)
	}
	use(t, k, b, 2) // 4 against 2 when asked, against 12 once made
	if k.has(&b.PublicKey) || !k.has(&a.PublicKey) {
		t.Fatal("the new table replaced one that scored more once it was made")
	}
}

// A key's signatures of the window before count in its table's score
// once it has one.
func TestKeyTableCarriesThePreviousWindow(t *testing.T) {
	k := newKeyTables(8, 1, 1<<40, nil)
	a := newKey(t)
	use(t, k, a, 5)
	k.roll()
	use(t, k, a, 8)
	id, _ := idOf(&a.PublicKey)
	k.mu.RLock()
	defer k.mu.RUnlock()
	kt := k.tables[id]
	if kt == nil {
		t.Fatal("no table after 8 signatures in a window")
	}
	if kt.hits.Load() != 8 || kt.prev.Load() != 5 {
		t.Fatalf("the table's counts: %d in this window and %d before, want 8 and 5", kt.hits.Load(), kt.prev.Load())
	}
}

// has reports whether pub has a table.
func (k *keyTables) has(pub *ecdsa.PublicKey) bool {
	id, ok := idOf(pub)
	if !ok {
		return false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.tables[id] != nil
}

// idOf is pub's keyID as verify looks it up.
func idOf(pub *ecdsa.PublicKey) (keyID, bool) {
	enc, err := pub.Bytes()
	return keyID(enc), err == nil
}
