package termtext

import (
	"strings"
	"testing"
)

// Each character that acts on a terminal is shown escaped, Go-style;
// other text, a backslash and other scripts among it, is left as it is.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"A-5531":                           "A-5531",
		"acct-48213 café 東京 \\n":           "acct-48213 café 東京 \\n",
		"A-5531\n9999aaaa0000  authorized": `A-5531\n9999aaaa0000  authorized`,
		"a\tb":                             `a\tb`,
		"RT\r\x1b[1A\x1b[2K":               `RT\r\x1b[1A\x1b[2K`,
		"\x00\x07\x7f":                     `\x00\x07\x7f`,
		"x\u0085y\u009bz":                  `x\u0085y\u009bz`,
		"\u202eredro\u202c":                `\u202eredro\u202c`,
		"\u2066a\u2069\u2028\u2029":        `\u2066a\u2069\u2028\u2029`,
		"bad \xff\xc3":                     `bad \xff\xc3`,
		"zero\u200bwidth":                  `zero\u200bwidth`,
		"A-5531\u200e\u061c\ufeff\u00ad":   `A-5531\u200e\u061c\ufeff\u00ad`,
		"a\u3164test\U000e0041":            `a\u3164test\U000e0041`,
		"emoji 👨\u200d👩 zwnj \u200c":       "emoji 👨\u200d👩 zwnj \u200c", // joiners: shown as they are
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := EscapeLines("line one\nline\ttwo\x1b[2K\r\n"), "line one\nline\\ttwo\\x1b[2K\\r\n"; got != want {
		t.Errorf("EscapeLines = %q, want %q", got, want)
	}
	if got, want := EscapeMarkup("<td>\tA-5531\u202e\u200b\r\n\x1b[8m\x00</td>"), "<td>\tA-5531\\u202e\\u200b\r\n\\x1b[8m\\x00</td>"; got != want {
		t.Errorf("EscapeMarkup = %q, want %q", got, want)
	}
}

// Nothing Escape returns acts on a terminal.
func TestEscapedTextHoldsNoControl(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x2100; r++ {
		all.WriteRune(r)
	}
	all.WriteString("\xff\xfe")
	for _, r := range Escape(all.String()) {
		if Control(r) || Invisible(r) {
			t.Fatalf("Escape left %U", r)
		}
	}
	for _, r := range EscapeMarkup(all.String()) {
		if (Control(r) || Invisible(r)) && !strings.ContainsRune("\t\n\r", r) {
			t.Fatalf("EscapeMarkup left %U", r)
		}
	}
}

// A name may hold no control character; free text a tab, a line feed
// and a CR before a line feed, and no other.
func TestFind(t *testing.T) {
	for _, c := range []struct {
		s    string
		text bool
		want int
	}{
		{"A-5531", false, -1},
		{"A-5531\n", false, 6},
		{"a\tb", false, 1},
		{"a\tb", true, -1},
		{"line\r\nline\n", true, -1},
		{"line\rover", true, 4},
		{"ends in CR\r", true, 10},
		{"x\x1b[2K", true, 1},
		{"é\u202e", false, 2},
		{"é\u202e", true, 2},
		{"x\u0085", true, 1},
		{"\u2028", true, 0},
	} {
		if got := Find(c.s, c.text); got != c.want {
			t.Errorf("Find(%q, %v) = %d, want %d", c.s, c.text, got, c.want)
		}
	}
}

// A cell a spreadsheet could read as a formula, also past leading spaces
// or in the full-width forms, is one; "-" alone, text and numbers are
// not.
func TestFormula(t *testing.T) {
	for cell, want := range map[string]bool{
		`=HYPERLINK("http://evil.example")`: true, "+1": true, "-1+1": true, "@SUM(1)": true,
		"\t=1": true, "\r=1": true, ` =cmd|'/c calc'!A1`: true, "\u00a0=1": true, "\u3000=1": true,
		"＝HYPERLINK(1)": true, "＋1": true, "－1": true, "＠SUM(1)": true,
		"": false, "-": false, "A-5531": false, "acct-48213": false, "2026-12-06": false, " A=1": false, "'=1": false,
	} {
		if got := Formula(cell); got != want {
			t.Errorf("Formula(%q) = %v, want %v", cell, got, want)
		}
	}
}

// A cell gets an apostrophe before each part a spreadsheet may read as a
// formula: the cell, and each part past a character a spreadsheet may
// split it at in another locale (";"), or reading it as text with another
// separator (a comma, a tab), or past a line break.
func TestCSVCell(t *testing.T) {
	for cell, want := range map[string]string{
		"":                            "",
		"-":                           "-",
		"A-5531":                      "A-5531",
		"cancel_order A-5531, A-5532": "cancel_order A-5531, A-5532",
		"=1":                          "'=1",
		" =1":                         "' =1",
		"A-5531;=cmd|' /C calc'!A0;":  "A-5531;'=cmd|' /C calc'!A0;",
		"a; =1":                       "a;' =1",
		"a,+1,b":                      "a,'+1,b",
		"a\t@SUM(1)":                  "a\t'@SUM(1)",
		"a\n-1+1":                     "a\n'-1+1",
		"a\r\n＝1":                     "a\r\n'＝1",
		"a;\t=1":                      "a;'\t'=1",
		"=1;=2":                       "'=1;'=2",
		"a;b=1;c":                     "a;b=1;c",
		"a;;;":                        "a;;;",
		"a; ; ;x":                     "a; ; ;x",
		"a;\u00a0=1":                  "a;'\u00a0=1",
		`a;"=1+1"`:                    `a;'"=1+1"`,
		`x;" =cmd|' /C calc'!A0"`:     `x;'" =cmd|' /C calc'!A0"`,
		`a;"b";c`:                     `a;"b";c`,
	} {
		if got := CSVCell(cell); got != want {
			t.Errorf("CSVCell(%q) = %q, want %q", cell, got, want)
		}
	}
}
