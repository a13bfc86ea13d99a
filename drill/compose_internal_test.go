package drill

import (
	"fmt"
	"strings"
	"testing"
	"time"
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

// Findings of distinct rows are never merged: rows that read alike to the
// second are said once with how many there are; the grant and closing
// sentences they share are said once.
func TestComposeCountsRowsThatReadAlike(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 14, 0, time.UTC)
	ran := answer{grant: "On 7 October 2026 13:07 UTC you allowed it.", finding: "At " + clock(at) + " your agent ran cancel_order on A-5531.", closing: "You can withdraw it."}
	rows := func(times ...time.Time) []answer {
		var out []answer
		for i, t := range times {
			a := ran
			a.row, a.at = fmt.Sprint("row", i), t
			out = append(out, a)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		answers []answer
		want    string
	}{
		{"one row", rows(at), "On 7 October 2026 13:07 UTC you allowed it. At 7 October 2026 13:12 UTC your agent ran cancel_order on A-5531.\n\nYou can withdraw it."},
		{"two in one second", rows(at, at), "On 7 October 2026 13:07 UTC you allowed it. At 7 October 2026 13:12 UTC your agent ran cancel_order on A-5531. This is on record twice.\n\nYou can withdraw it."},
		{"three, two in one second", rows(at, at.Add(20*time.Second), at),
			"On 7 October 2026 13:07 UTC you allowed it. At 7 October 2026 13:12:14 UTC your agent ran cancel_order on A-5531. This is on record twice. At 7 October 2026 13:12:34 UTC your agent ran cancel_order on A-5531.\n\nYou can withdraw it."},
		{"three in one second", rows(at, at, at), "On 7 October 2026 13:07 UTC you allowed it. At 7 October 2026 13:12 UTC your agent ran cancel_order on A-5531. This is on record 3 times.\n\nYou can withdraw it."},
		{"the reply's own sentences", []answer{{finding: "We hold more records."}, {finding: "We hold more records."}}, "We hold more records."},
	} {
		if got := compose(c.answers); got != c.want {
			t.Errorf("%s: compose = %q, want %q", c.name, got, c.want)
		}
	}
}

// Rows under two grants are never counted together: each grant's
// sentence is followed by the findings of its own rows, so a row is never
// said to have run "under that permission" of another grant, and rows
// under one grant follow its sentence wherever they are in the drill.
func TestComposeCountsRowsThatReadAlikeUnderTheirOwnGrant(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 14, 0, time.UTC)
	f := "At " + clock(at) + " your agent, under that permission, ran cancel_order on A-5531."
	g1 := "On 1 October 2026 09:00 UTC you allowed Agent to read your orders."
	g2 := "On 5 October 2026 09:00 UTC you allowed Agent to cancel orders."
	row := func(id, grant, finding string) answer {
		return answer{grant: grant, finding: finding, closing: "You can withdraw it.", row: id, at: at}
	}
	other := "At " + clock(at.Add(time.Hour)) + " your agent, under that permission, ran cancel_order on A-5532."
	for _, c := range []struct {
		name    string
		answers []answer
		want    string
	}{
		{"two grants", []answer{row("r1", g1, f), row("r2", g2, f)},
			g1 + " " + f + " " + g2 + " " + f + "\n\nYou can withdraw it."},
		{"two grants, two rows under the first", []answer{row("r1", g1, f), row("r2", g2, f), row("r3", g1, f)},
			g1 + " " + f + " This is on record twice. " + g2 + " " + f + "\n\nYou can withdraw it."},
		{"a row under the first grant after the second's", []answer{row("r1", g1, f), row("r2", g2, f), row("r3", g1, other)},
			g1 + " " + f + " " + other + " " + g2 + " " + f + "\n\nYou can withdraw it."},
	} {
		if got := compose(c.answers); got != c.want {
			t.Errorf("%s: compose = %q, want %q", c.name, got, c.want)
		}
	}
}
