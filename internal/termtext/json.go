package termtext

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// EscapeJSON is JSON text b with each character that acts on a terminal
// or is drawn as nothing, and that a JSON encoder writes as it is (a C1
// control, a bidirectional override or isolate, a line or paragraph
// separator, a zero-width space: Control and Invisible above ASCII, in a
// value another party chose) written as a \u escape instead: the same
// JSON to a program, and nothing a terminal acts on or hides. Encoders
// escape the ASCII ones themselves.
func EscapeJSON(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for _, r := range string(b) {
		if r < utf8.RuneSelf || !Control(r) && !Invisible(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
			continue
		}
		fmt.Fprintf(&out, `\u%04x`, r)
	}
	return out.String()
}
