package verifier

import (
	"bytes"
	"math/big"
	"math/rand/v2"
	"testing"
)

// otherSignature's n − s, written byte by byte, is math/big's, and it
// refuses exactly the r and s outside (0, n) (and, for the low form, the s
// at or below n/2): at the edges and for random values.
func TestOtherSignatureAgainstBigInts(t *testing.T) {
	n := new(big.Int).Set(p256Order)
	half := new(big.Int).Rsh(n, 1)
	one := big.NewInt(1)
	edges := []*big.Int{
		big.NewInt(0), one, big.NewInt(255), big.NewInt(256),
		new(big.Int).Sub(half, one), half, new(big.Int).Add(half, one),
		new(big.Int).Sub(n, one), n, new(big.Int).Add(n, one),
		new(big.Int).Sub(new(big.Int).Lsh(one, 256), one),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	values := append([]*big.Int{}, edges...)
	for range 2000 {
		var b [32]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 { // near n: borrows run across many bytes
			b = [32]byte(n.FillBytes(make([]byte, 32)))
			b[31-rng.IntN(32)] ^= byte(1 + rng.IntN(255))
		}
		values = append(values, new(big.Int).SetBytes(b[:]))
	}
	inRange := func(x *big.Int) bool { return x.Sign() > 0 && x.Cmp(n) < 0 }
	r := new(big.Int).Sub(n, big.NewInt(7))
	for i, s := range values {
		rv := r
		if i%3 == 0 {
			rv = values[(i*7+1)%len(values)]
		}
		sig := append(rv.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		tok := Token{sig: sig, es256: true}
		for _, lowOnly := range []bool{false, true} {
			got, ok := tok.otherSignature(lowOnly)
			want := inRange(s) && (lowOnly && s.Cmp(half) > 0 || !lowOnly && inRange(rv))
			if ok != want {
				t.Fatalf("r %x, s %x, lowOnly %v: ok %v, want %v", rv, s, lowOnly, ok, want)
			}
			if !ok {
				continue
			}
			other := new(big.Int).Sub(n, s).FillBytes(make([]byte, 32))
			if !bytes.Equal(got[:32], sig[:32]) || !bytes.Equal(got[32:], other) {
				t.Fatalf("r %x, s %x: got %x, want r and %x", rv, s, got, other)
			}
		}
	}
}
