package server

import "testing"

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
