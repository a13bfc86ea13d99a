package p256

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"math/big"
	mrand "math/rand/v2"
	"testing"

	"filippo.io/nistec"
)

// keyOf returns the public key d·G.
func keyOf(t testing.TB, d *big.Int) *ecdsa.PublicKey {
	t.Helper()
	p, err := nistec.NewP256Point().ScalarBaseMult(new(big.Int).Mod(d, order).FillBytes(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), p.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// newKey returns a new P-256 key.
func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newTable(t testing.TB, pub *ecdsa.PublicKey) *Table {
	t.Helper()
	tab, err := NewTable(pub)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// agree checks Verify against ecdsa.Verify for one signature and returns
// the verdict both gave.
func agree(t testing.TB, tab *Table, pub *ecdsa.PublicKey, hash []byte, r, s *big.Int, what string) bool {
	t.Helper()
	want := ecdsa.Verify(pub, hash, r, s)
	if got := tab.Verify(hash, r, s); got != want {
		t.Fatalf("%s: hash %x r %x s %x: table says %v, crypto/ecdsa %v", what, hash, r, s, got, want)
	}
	return want
}

// Every verdict is crypto/ecdsa's: for real signatures, their high-s
// twins, the wrong hash, hashes of other lengths, r and s at and past the
// edges of [1, n−1], another key's signature.
func TestVerifyAgreesWithCryptoECDSA(t *testing.T) {
	one := big.NewInt(1)
	edges := []*big.Int{big.NewInt(0), one, new(big.Int).Sub(order, one), order, new(big.Int).Add(order, one), new(big.Int).Lsh(one, 256)}
	other := newKey(t)
	var passed, failed int
	for range 3 {
		priv := newKey(t)
		pub := &priv.PublicKey
		tab := newTable(t, pub)
		count := func(ok bool) {
			if ok {
				passed++
			} else {
				failed++
			}
		}
		for i := range 150 {
			msg := []byte{byte(i), byte(i >> 8), 'm'}
			hash := sha256.Sum256(msg)
			r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
			if err != nil {
				t.Fatal(err)
			}
			if !agree(t, tab, pub, hash[:], r, s, "signature") {
				t.Fatal("a real signature does not verify")
			}
			count(agree(t, tab, pub, hash[:], r, new(big.Int).Sub(order, s), "high-s twin"))
			bad := hash
			bad[i%32] ^= 1 << (i % 8)
			count(agree(t, tab, pub, bad[:], r, s, "wrong hash"))
			count(agree(t, tab, pub, append(hash[:], 0xaa, 0xbb), r, s, "longer hash"))
			count(agree(t, tab, pub, hash[:20], r, s, "shorter hash"))
			count(agree(t, tab, pub, nil, r, s, "empty hash"))
			count(agree(t, tab, pub, hash[:], s, r, "r and s swapped"))
			count(agree(t, tab, pub, hash[:], new(big.Int).Add(r, one), s, "r + 1"))
			count(agree(t, tab, pub, hash[:], new(big.Int).Add(r, order), s, "r + n"))
			count(agree(t, tab, pub, hash[:], r, new(big.Int).Add(s, order), "s + n"))
			e := edges[i%len(edges)]
			count(agree(t, tab, pub, hash[:], e, s, "r at an edge"))
			count(agree(t, tab, pub, hash[:], r, e, "s at an edge"))
			or, os, err := ecdsa.Sign(rand.Reader, other, hash[:])
			if err != nil {
				t.Fatal(err)
			}
			count(agree(t, tab, pub, hash[:], or, os, "another key's signature"))
		}
	}
	if passed == 0 || failed == 0 {
		t.Fatalf("%d passed and %d failed: both verdicts should occur", passed, failed)
	}
}

// The sums that reach the point at infinity or add a point to itself are
// crypto/ecdsa's too. With Q = G (d = 1), u1·G + u2·Q is (u1 + u2)·G: the
// point at infinity when e ≡ −r, a doubling when e ≡ r; with Q = −G it is
// (u1 − u2)·G, the point at infinity when e ≡ r.
func TestVerifyAtTheSumsEdges(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(7, 11))
	for _, d := range []*big.Int{big.NewInt(1), new(big.Int).Sub(order, big.NewInt(1)), big.NewInt(2)} {
		pub := keyOf(t, d)
		tab := newTable(t, pub)
		for range 50 {
			var b [32]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			r := new(big.Int).Mod(new(big.Int).SetBytes(b[:]), order)
			if r.Sign() == 0 {
				continue
			}
			s := new(big.Int).Add(big.NewInt(int64(rng.IntN(1000))), big.NewInt(1))
			for _, e := range []*big.Int{r, new(big.Int).Sub(order, r), new(big.Int).Add(r, order)} {
				if e.BitLen() > 256 {
					continue
				}
				hash := e.FillBytes(make([]byte, 32))
				agree(t, tab, pub, hash, r, s, "sum at an edge")
			}
		}
	}
}

// The table's product is nistec's ScalarMult for small scalars, powers of
// two, n−1, n and past it, scalars of one byte repeated (from 0x81 up every
// digit is negative and carries into the next, 0xff's carries ripple to
// the top), and random scalars.
func TestMulAgreesWithScalarMult(t *testing.T) {
	priv := newKey(t)
	tab := newTable(t, &priv.PublicKey)
	q, err := nistec.NewP256Point().SetBytes(mustBytes(t, &priv.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	var scalars [][32]byte
	add := func(x *big.Int) {
		var k [32]byte
		new(big.Int).Mod(x, new(big.Int).Lsh(big.NewInt(1), 256)).FillBytes(k[:])
		scalars = append(scalars, k)
	}
	for _, x := range []int64{0, 1, 2, 255, 256, 257, 65535} {
		add(big.NewInt(x))
	}
	for i := range 256 {
		add(new(big.Int).Lsh(big.NewInt(1), uint(i)))
	}
	for _, d := range []int64{-1, 0, 1, 255} {
		add(new(big.Int).Add(order, big.NewInt(d)))
	}
	for _, fill := range []byte{0x01, 0x7f, 0x80, 0x81, 0xfe, 0xff} { // 0x81 and up carry into every next digit
		var k [32]byte
		for i := range k {
			k[i] = fill
		}
		scalars = append(scalars, k)
	}
	rng := mrand.New(mrand.NewPCG(3, 5))
	for range 200 {
		var k [32]byte
		for i := range k {
			if rng.IntN(3) > 0 { // zero bytes skip a row
				k[i] = byte(rng.Uint32())
			}
		}
		scalars = append(scalars, k)
	}
	for _, k := range scalars {
		reduced := new(big.Int).Mod(new(big.Int).SetBytes(k[:]), order).FillBytes(make([]byte, 32))
		want, err := nistec.NewP256Point().ScalarMult(q, reduced)
		if err != nil {
			t.Fatal(err)
		}
		if got := tab.mul(&k); string(got.Bytes()) != string(want.Bytes()) {
			t.Fatalf("scalar %x: the table's product differs from ScalarMult", k)
		}
	}
}

// A key that is not a point of P-256 gets no table.
func TestNewTableRefusesBadKeys(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, pub := range map[string]*ecdsa.PublicKey{
		"nil":      nil,
		"P-384":    &p384.PublicKey,
		"no curve": {},
	} {
		if _, err := NewTable(pub); err == nil {
			t.Errorf("%s: got a table", name)
		}
	}
}

// FuzzVerifyAgrees checks any hash and signature bytes against
// crypto/ecdsa with one key.
func FuzzVerifyAgrees(f *testing.F) {
	priv := newKey(f)
	tab := newTable(f, &priv.PublicKey)
	hash := sha256.Sum256([]byte("seed"))
	r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(hash[:], r.Bytes(), s.Bytes())
	f.Add(hash[:], new(big.Int).Sub(order, big.NewInt(1)).Bytes(), []byte{1})
	f.Fuzz(func(t *testing.T, hash, rb, sb []byte) {
		if len(rb) > 40 || len(sb) > 40 {
			return
		}
		agree(t, tab, &priv.PublicKey, hash, new(big.Int).SetBytes(rb), new(big.Int).SetBytes(sb), "fuzzed")
	})
}

// BenchmarkVerify compares a table's verification with crypto/ecdsa's
// (b.ReportMetric: the ratio is read from the two sub-benchmarks).
func BenchmarkVerify(b *testing.B) {
	priv := newKey(b)
	hash := sha256.Sum256([]byte("bench"))
	r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
	if err != nil {
		b.Fatal(err)
	}
	tab := newTable(b, &priv.PublicKey)
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			if !tab.Verify(hash[:], r, s) {
				b.Fatal("no")
			}
		}
	})
	b.Run("crypto-ecdsa", func(b *testing.B) {
		for b.Loop() {
			if !ecdsa.Verify(&priv.PublicKey, hash[:], r, s) {
				b.Fatal("no")
			}
		}
	})
	b.Run("new-table", func(b *testing.B) {
		for b.Loop() {
			newTable(b, &priv.PublicKey)
		}
	})
}

// A signature whose sum has an x coordinate in [n, p), which happens by
// chance about once in 2¹²⁸, made on purpose: pick such a point R, a hash
// e and an s, and the key Q = r⁻¹(s·R − e·G) with r = x − n. Then
// u1·G + u2·Q = R, and both verifiers accept r = x − n.
func TestVerifyReducesXModN(t *testing.T) {
	curve := elliptic.P256().Params()
	p := curve.P
	three := big.NewInt(3)
	x := new(big.Int).Add(order, big.NewInt(1))
	var y *big.Int
	for ; x.Cmp(p) < 0; x.Add(x, big.NewInt(1)) {
		rhs := new(big.Int).Exp(x, three, p) // x³ − 3x + b
		rhs.Sub(rhs, new(big.Int).Mul(three, x))
		rhs.Add(rhs, curve.B)
		rhs.Mod(rhs, p)
		if y = new(big.Int).ModSqrt(rhs, p); y != nil {
			break
		}
	}
	if y == nil {
		t.Fatal("no point with x in [n, p)")
	}
	enc := append([]byte{4}, x.FillBytes(make([]byte, 32))...)
	R, err := nistec.NewP256Point().SetBytes(append(enc, y.FillBytes(make([]byte, 32))...))
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte("x past n"))
	e := new(big.Int).Mod(new(big.Int).SetBytes(hash[:]), order)
	s := big.NewInt(12345)
	r := new(big.Int).Sub(x, order)
	scalar := func(v *big.Int) []byte { return new(big.Int).Mod(v, order).FillBytes(make([]byte, 32)) }
	sR, err := nistec.NewP256Point().ScalarMult(R, scalar(s))
	if err != nil {
		t.Fatal(err)
	}
	minusEG, err := nistec.NewP256Point().ScalarBaseMult(scalar(new(big.Int).Neg(e)))
	if err != nil {
		t.Fatal(err)
	}
	Q, err := nistec.NewP256Point().ScalarMult(sR.Add(sR, minusEG), scalar(new(big.Int).ModInverse(r, order)))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), Q.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(t, pub)
	if !agree(t, tab, pub, hash[:], r, s, "x past n, r = x − n") {
		t.Fatal("crypto/ecdsa refused the signature made to reach x past n")
	}
	agree(t, tab, pub, hash[:], x, s, "x past n, r = x")
}

// A table with a wrong point is not made: check finds it with any scalar
// that takes the point.
func TestCheckFindsAWrongPoint(t *testing.T) {
	tab, q := tableOf(t, 987654321)
	var k [32]byte
	for i := range k {
		k[i] = byte(i + 1)
	}
	if err := tab.check(q, [][32]byte{k}); err != nil {
		t.Fatal(err)
	}
	const row, digit = 26, 31 - 26 + 1 // k's byte for row 26 is k[31-26]
	tab.multiples[row][digit-1].Double(&tab.multiples[row][digit-1])
	if err := tab.check(q, [][32]byte{k}); err == nil {
		t.Fatal("a wrong point in row 26 was not found")
	}
}

// The self-check's scalars take the top point too: a wrong one is found.
func TestCheckCoversTheTop(t *testing.T) {
	tab, q := tableOf(t, 123456789)
	tab.top.Double(&tab.top)
	for range 20 {
		var k [32]byte
		nonZeroDigits(&k)
		if err := tab.check(q, [][32]byte{k}); err == nil {
			t.Fatalf("scalar %x: a wrong top point was not found", k)
		}
	}
}

// The self-check's scalars have no zero digit and carry out of the last
// byte, whatever their random bytes: every row and the top are used.
func TestNonZeroDigitsTakeEveryRow(t *testing.T) {
	for range 200_000 {
		var k [32]byte
		nonZeroDigits(&k)
		carry := 0
		for i := range windows {
			var d int
			if d, carry = digit(k[31-i], carry); d == 0 {
				t.Fatalf("scalar %x: digit %d is zero", k, i)
			}
		}
		if carry != 1 {
			t.Fatalf("scalar %x: no carry out of the last byte", k)
		}
	}
	for _, c := range []struct {
		b         byte
		carry     int
		d, carry2 int
	}{{0, 0, 0, 0}, {128, 0, 128, 0}, {127, 1, 128, 0}, {128, 1, -127, 1}, {129, 0, -127, 1}, {255, 0, -1, 1}, {255, 1, 0, 1}} {
		if d, next := digit(c.b, c.carry); d != c.d || next != c.carry2 {
			t.Errorf("digit(%d, %d) = %d, %d; want %d, %d", c.b, c.carry, d, next, c.d, c.carry2)
		}
	}
}

// tableOf returns the table of the key with private scalar d, and the key
// as a nistec point.
func tableOf(t *testing.T, d int64) (*Table, *nistec.P256Point) {
	t.Helper()
	pub := keyOf(t, big.NewInt(d))
	q, err := nistec.NewP256Point().SetBytes(mustBytes(t, pub))
	if err != nil {
		t.Fatal(err)
	}
	return newTable(t, pub), q
}

func mustBytes(t *testing.T, pub *ecdsa.PublicKey) []byte {
	t.Helper()
	b, err := pub.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
