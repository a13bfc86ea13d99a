package move

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
)

// digest counts table rows and hashes them as a set: the sum, modulo
// 2^256, of the SHA-256 of each row's values. The sum does not depend on
// the order rows are read in, so each side is read in whatever order its
// engine gives, and a row missing, added, duplicated or changed on one
// side changes it.
type digest struct {
	n   int64
	sum [4]uint64 // little-endian limbs
}

// add adds one row of values.
func (d *digest) add(vals []any) error {
	h := sha256.New()
	var buf []byte
	for _, v := range vals {
		var err error
		if buf, err = appendValue(buf[:0], v); err != nil {
			return err
		}
		h.Write(buf)
	}
	var s [sha256.Size]byte
	h.Sum(s[:0])
	var carry uint64
	for i := range d.sum {
		limb := binary.LittleEndian.Uint64(s[8*i:])
		d.sum[i], carry = bits.Add64(d.sum[i], limb, carry)
	}
	d.n++
	return nil
}

// hex is the sum as 64 hex digits.
func (d digest) hex() string {
	var b [32]byte
	for i, limb := range d.sum {
		binary.BigEndian.PutUint64(b[24-8*i:], limb)
	}
	return hex.EncodeToString(b[:])
}

// appendValue appends a typed, length-prefixed encoding of v: values of
// different types or lengths never encode alike.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, 'n'), nil
	case string:
		b = binary.BigEndian.AppendUint64(append(b, 's'), uint64(len(x)))
		return append(b, x...), nil
	case []byte:
		b = binary.BigEndian.AppendUint64(append(b, 'b'), uint64(len(x)))
		return append(b, x...), nil
	case int16:
		return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(x)), nil
	case int32:
		return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(x)), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(x)), nil
	case bool:
		if x {
			return append(b, 't'), nil
		}
		return append(b, 'f'), nil
	}
	return nil, fmt.Errorf("no encoding for a value of type %T", v)
}
