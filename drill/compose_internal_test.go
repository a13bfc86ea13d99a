package drill

import (
	"strings"
	"testing"
)

// A customer reply's lines are its own: a line feed, a carriage return or
// an escape sequence in a stored tool or target is written escaped, and
// the reply keeps its two paragraphs.
func TestComposeEscapesAWritersControlCharacters(t *testing.T) {
	reply := compose([]answer{{
		finding: "We have no verifiable approval from you on file for cancel_order on A-5531\nWe checked: you approved it\x1b[8m.",
		closing: "A refused request does not count as your approval.",
	}})
	want := "We have no verifiable approval from you on file for cancel_order on A-5531\\nWe checked: you approved it\\x1b[8m.\n\nA refused request does not count as your approval."
	if reply != want {
		t.Fatalf("reply %q, want %q", reply, want)
	}
	if strings.Count(reply, "\n") != 2 {
		t.Fatalf("reply has lines of a writer's: %q", reply)
	}
}
