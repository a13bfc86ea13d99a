package verifier

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// A segment outside the alphabet is named by its first such byte, whether
// or not the strict decoder would skip it; one in the alphabet that does
// not decode canonically is named as such.
func TestSegmentErrors(t *testing.T) {
	const header, payload, sig = "eyJhbGciOiJFUzI1NiJ9", "e30", "AAAA"
	for _, c := range []struct{ tok, want string }{
		{header + ".e3\r0." + sig, `payload holds '\r', outside the base64url alphabet`},
		{header + ".e30." + "AA\nAA", `signature holds '\n', outside the base64url alphabet`},
		{"eyJhbGciOiJFUzI1NiJ9 ." + payload + "." + sig, `header holds ' ', outside the base64url alphabet`},
		{header + ".e3+0." + sig, `payload holds '+', outside the base64url alphabet`},
		{header + ".e30=." + sig, `payload holds '=', outside the base64url alphabet`},
		{header + ".e31." + sig, `payload is not canonical base64url`},
		{header + ".e." + sig, `payload is not canonical base64url`},
	} {
		_, _, err := segments(c.tok)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrNotCanonical) || !errors.Is(err, ErrMalformed) {
			t.Errorf("segments(%q) = %v, want an error saying %q", c.tok, err, c.want)
		}
	}
	if _, d, err := segments(header + "." + payload + "." + sig); err != nil || string(d[1]) != "{}" {
		t.Fatalf("segments of a canonical token: %q, %v", d[1], err)
	}
}

// A time claim's text as sent is quoted in the check's detail: bytes that
// are not UTF-8, or a long value cut short, leave the detail UTF-8.
func TestTimeClaimDetailIsUTF8(t *testing.T) {
	for _, raw := range []string{"\"\xff\xfe\"", `"` + strings.Repeat("é", 40) + `"`, "[\"\xe2\x82\"]", strings.Repeat("9", 400)} {
		var d NumericDate
		if err := d.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		_, err := d.Check("iat")
		if err == nil {
			t.Fatalf("%q: a usable time", raw)
		}
		if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 200 {
			t.Errorf("%q: detail %q (%d bytes) is not UTF-8 or not cut short", raw, msg, len(msg))
		}
	}
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"a\xff\xfeb", 5, "a\uFFFDb"},
		{"ééé", 3, "é…"}, // byte 3 is within the second é
	} {
		if got := truncate(c.in, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
