package verifier

import (
	"errors"
	"strings"
	"testing"
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
