package bolt

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// referenceIDKey is idKey written the plain way, a comparison a byte
// and encoding/hex: the rule idKey keeps, and the cost it is measured
// against.
func referenceIDKey(id string) []byte {
	plain := len(id) == 64
	for i := 0; plain && i < len(id); i++ {
		c := id[i]
		plain = ('0' <= c && c <= '9') || ('a' <= c && c <= 'f')
	}
	if plain {
		k, _ := hex.DecodeString(id)
		return k
	}
	if len(id)+1 == 32 {
		return append(append([]byte{textMark32}, id...), 0)
	}
	return append([]byte{textMark}, id...)
}

func randomHexID(t testing.TB) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestIDKey(t *testing.T) {
	ids := []string{"", "a", "receipt-1", strings.Repeat("x", 31), strings.Repeat("0", 63), strings.Repeat("0", 65),
		strings.Repeat("0", 64), strings.Repeat("f", 64), strings.Repeat("F", 64)}
	for range 100 {
		ids = append(ids, randomHexID(t))
	}
	// Every byte value at every position of a hex id: only the sixteen
	// lowercase digits keep it a hex id.
	base := randomHexID(t)
	for i := range 64 {
		for c := range 256 {
			ids = append(ids, base[:i]+string([]byte{byte(c)})+base[i+1:])
		}
	}
	hexIDs := 0
	for _, id := range ids {
		want := referenceIDKey(id)
		got := idKey(id)
		if !bytes.Equal(got, want) {
			t.Fatalf("idKey(%q) = %x, want %x", id, got, want)
		}
		if isHexID(id) != (len(want) == 32) {
			t.Fatalf("isHexID(%q) = %v, want %v", id, isHexID(id), len(want) == 32)
		}
		if back := idString(got); back != id {
			t.Fatalf("idString(idKey(%q)) = %q", id, back)
		}
		if len(want) == 32 {
			hexIDs++
		}
	}
	// Two listed ids and the random ones are hex, and 64 × 16 of the
	// changed ones (the base among them).
	if want := 2 + 100 + 64*16; hexIDs != want {
		t.Fatalf("%d hex ids, want %d", hexIDs, want)
	}
}

func BenchmarkIDKey(b *testing.B) {
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = randomHexID(b)
	}
	b.Run("table", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			idKey(ids[i%len(ids)])
		}
	})
	b.Run("reference", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			referenceIDKey(ids[i%len(ids)])
		}
	})
}

func TestSeekKey(t *testing.T) {
	id := randomHexID(t)
	for _, c := range []struct {
		key  string
		want []byte
	}{
		{"", nil},
		{id, idKey(id)},
		{id[:10], idKey(id)[:5]},
		{id[:11], append(idKey(id)[:5:5], hexVal[id[10]]<<4)},
		{id + "-x", append(idKey(id), 0)},
		{"receipt-1", append([]byte{textMark}, "receipt-1"...)},
		{id[:10] + "G", append([]byte{textMark}, id[:10]+"G"...)},
		{strings.ToUpper(id), append([]byte{textMark}, strings.ToUpper(id)...)},
	} {
		if got := seekKey(c.key); !bytes.Equal(got, c.want) {
			t.Errorf("seekKey(%q) = %x, want %x", c.key, got, c.want)
		}
	}
}
