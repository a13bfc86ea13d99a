// Package p256 verifies ECDSA P-256 signatures made with one public key
// faster than crypto/ecdsa, once a table of the key's multiples has been
// computed.
//
// An ECDSA verification computes u1·G + u2·Q, G the curve's generator and
// Q the public key. crypto/ecdsa keeps a table of G's multiples, so u1·G
// costs a few dozen point additions, but it multiplies by Q afresh for
// every signature: 256 doublings and some 64 additions, about 70 % of a
// verification. A ledger checks thousands of signatures a second made by
// a handful of keys (each Provider's receipt key, each personal agent's
// request key), so a Table computes, once per key, Q's multiples
// j·256^i·Q for every byte position i and j from 1 to 128; u2 is read as
// signed digits of a byte, −127 to 128, and u2·Q is then the sum of one
// table point, or its negation, per non-zero digit: 33 additions at most.
//
// Only the multiplication by Q is done differently. The point arithmetic
// is filippo.io/nistec's, the standard library's own P-256 code exported,
// the scalars are math/big's, and the steps around them are FIPS 186-5's
// verification as crypto/ecdsa performs it: r and s in [1, n−1], the hash
// taken as an integer, w = s⁻¹, u1 = e·w and u2 = r·w mod n, the sum's x
// coordinate reduced mod n compared with r. Every value is public, so
// nothing here needs to run in constant time.
package p256

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"filippo.io/nistec"
)

const (
	// windowBits is the width of the digits u2 is read in: one byte.
	windowBits = 8
	// windows is the number of byte positions of a 256-bit scalar.
	windows = 256 / windowBits
	// digits is the number of positive values a digit takes, 1 to 128:
	// a digit above 128 is taken as digit − 256 with 1 carried to the
	// next position, so the table holds half the multiples and a
	// negative digit's point is a table point negated.
	digits = 1 << (windowBits - 1)
)

// order is n, the order of P-256's generator.
var order = elliptic.P256().Params().N

// Table holds the multiples of one P-256 public key that Verify sums.
// It is about 384 KiB. A Table is read-only once made and may be used by
// any number of goroutines at once.
type Table struct {
	// multiples[i][j-1] is j·256^i·Q.
	multiples [windows][digits]nistec.P256Point
	// top is 256^32·Q, for the digit carried out of the last byte.
	top nistec.P256Point
}

// Size is the memory a Table holds, in bytes.
const Size = (windows*digits + 1) * 96

// NewTable computes the table of pub's multiples. pub must be a point of
// P-256 other than the point at infinity. It takes about 2 ms, the time
// of some thirty verifications: a table pays for itself only for a key
// that signs many times.
func NewTable(pub *ecdsa.PublicKey) (*Table, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, errors.New("p256: not a P-256 public key")
	}
	enc, err := pub.Bytes()
	if err != nil {
		return nil, fmt.Errorf("p256: public key: %w", err)
	}
	q, err := nistec.NewP256Point().SetBytes(enc) // refuses a point off the curve
	if err != nil {
		return nil, fmt.Errorf("p256: public key: %w", err)
	}
	t := new(Table)
	base := nistec.NewP256Point().Set(q) // 256^i·Q
	for i := range windows {
		row := &t.multiples[i]
		row[0].Set(base)
		for j := 1; j < digits; j++ {
			row[j].Add(&row[j-1], base)
		}
		base.Double(&row[digits-1]) // 2·128·256^i·Q
	}
	t.top.Set(base)
	var scalars [2][32]byte
	for i := range scalars {
		nonZeroDigits(&scalars[i])
	}
	if err := t.check(q, scalars[:]); err != nil {
		return nil, err
	}
	return t, nil
}

// nonZeroDigits fills k with a random scalar none of whose signed digits
// is zero and whose last digit carries, so that mul takes a point from
// every row and the top: bytes from 1 to 254 (with a carry, 1 to 255: never
// 0 or 256), the first from 0x81 to 0xfe (with or without a carry, a
// negative digit that carries).
func nonZeroDigits(k *[32]byte) {
	rand.Read(k[:]) // crypto/rand never returns an error: it stops the program
	for i := range k {
		k[i] = 1 + k[i]%254
	}
	k[0] = 0x81 + k[0]%0x7e
}

// check compares the table's product with nistec's ScalarMult of q for each
// of scalars, so that a table that came out wrong is never used.
func (t *Table) check(q *nistec.P256Point, scalars [][32]byte) error {
	for _, k := range scalars {
		want, err := nistec.NewP256Point().ScalarMult(q, k[:])
		if err != nil {
			return fmt.Errorf("p256: %w", err)
		}
		if got := t.mul(&k); string(got.Bytes()) != string(want.Bytes()) {
			return errors.New("p256: the table's product differs from nistec's")
		}
	}
	return nil
}

// mul returns k·Q for a 32-byte big-endian scalar k: the sum over its
// signed digits, from the last byte, of the table point of each positive
// digit and the negated point of each negative one. A zero digit adds
// nothing (a public scalar, so its digits may decide the work done).
func (t *Table) mul(k *[32]byte) *nistec.P256Point {
	acc := nistec.NewP256Point() // the point at infinity
	var neg nistec.P256Point
	carry := 0
	for i := range windows {
		var d int
		d, carry = digit(k[31-i], carry)
		switch {
		case d > 0:
			acc.Add(acc, &t.multiples[i][d-1])
		case d < 0:
			acc.Add(acc, neg.Negate(&t.multiples[i][-d-1]))
		}
	}
	if carry != 0 {
		acc.Add(acc, &t.top)
	}
	return acc
}

// digit returns the signed digit, −127 to 128, of byte b with the carry
// from the byte after it, and the carry to the byte before.
func digit(b byte, carry int) (d, next int) {
	d = int(b) + carry
	if d > digits {
		return d - 1<<windowBits, 1
	}
	return d, 0
}

// Verify reports whether (r, s) is a valid ECDSA signature of hash by the
// table's key, as ecdsa.Verify does for a P-256 key: r and s must lie in
// [1, n−1], and a hash longer than 32 bytes is cut to its first 32.
func (t *Table) Verify(hash []byte, r, s *big.Int) bool {
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(order) >= 0 || s.Cmp(order) >= 0 {
		return false
	}
	if len(hash) > 32 {
		hash = hash[:32]
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	e := sc.e.SetBytes(hash)
	w := sc.w.ModInverse(s, order)
	if w == nil {
		return false
	}
	var b1, b2 [32]byte
	mulMod(sc, e, w).FillBytes(b1[:])
	mulMod(sc, r, w).FillBytes(b2[:])
	p, err := nistec.NewP256Point().ScalarBaseMult(b1[:])
	if err != nil {
		return false
	}
	p.Add(p, t.mul(&b2))
	x, err := p.BytesX() // fails for the point at infinity
	if err != nil {
		return false
	}
	v := sc.e.SetBytes(x)
	if v.Cmp(order) >= 0 {
		v.Sub(v, order)
	}
	return v.Cmp(r) == 0
}

// scratch is Verify's integers, kept from one check to the next so that
// their digits are not allocated for every signature.
type scratch struct{ e, w, prod, quo, rem big.Int }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// mulMod returns a·b mod n in sc.rem, for a and b not sc's prod, quo or
// rem.
func mulMod(sc *scratch, a, b *big.Int) *big.Int {
	sc.prod.Mul(a, b)
	sc.quo.QuoRem(&sc.prod, order, &sc.rem) // a·b ≥ 0: the remainder is the residue
	return &sc.rem
}
