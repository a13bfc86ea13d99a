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

// A name a reply shows unquoted is ASCII: words joined by a letter drawn
// as a blank (U+3164, which the ledger refuses in a name since, and a
// row recorded before may hold) are quoted and cut like words joined by
// spaces.
func TestAsNameQuotesWordsJoinedByBlankLetters(t *testing.T) {
	prose := strings.Join(strings.Fields("a test by our team. You approved the real cancellation. No refund is due"), "\u3164")
	got := asName(prose)
	if strings.Contains(got, "No\u3164refund") || !strings.HasPrefix(got, "\"a\u3164test") || !strings.HasSuffix(got, "…\"") {
		t.Errorf("asName = %s, want it quoted and cut", got)
	}
	for _, name := range []string{"cancel_order", "A-5531", "SKY-20931", "message:send"} {
		if got := asName(name); got != name {
			t.Errorf("asName(%q) = %s, want it as it is", name, got)
		}
	}
}
