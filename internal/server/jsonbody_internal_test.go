package server

import (
	"strings"
	"testing"
)

func TestJSONObjects(t *testing.T) {
	for _, tc := range []struct {
		in          string
		limit, want int
	}{
		{`{}`, 10, 1},
		{`{"a":{"b":[{},{}]}}`, 10, 4},
		{`{"a":"{{{"}`, 10, 1},
		{`{"a":"\"{"}`, 10, 1},
		{`{"a":"\\"}{}`, 10, 2},
		{`[{},{},{},{},{}]`, 2, 3}, // stops once past the limit
	} {
		if got := jsonObjects([]byte(tc.in), tc.limit); got != tc.want {
			t.Errorf("jsonObjects(%s, %d) = %d, want %d", tc.in, tc.limit, got, tc.want)
		}
	}
}

// BenchmarkJSONObjects: a batch of 100 receipts' JSON, about 460 KB.
func BenchmarkJSONObjects(b *testing.B) {
	one := `{"receiptJws":"` + strings.Repeat("eyJhbGciOiJFUzI1NiJ9", 80) + `","requestJwt":"` + strings.Repeat("x", 1500) +
		`","delegationToken":"` + strings.Repeat("y", 1300) + `","actions":[{"tool":"cancel_order","target":"A-5531","argsJson":"{\"order\":\"A-5531\"}"}]}`
	body := []byte(`{"receipts":[` + strings.Repeat(one+",", 99) + one + `]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if jsonObjects(body, maxObjects) != 201 {
			b.Fatal("count")
		}
	}
}
