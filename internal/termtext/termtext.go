// Package termtext keeps text that ledgerd holds from acting on the
// terminal that shows it. A writer's key chooses much of what a row says
// (a refusal's claimed principal and agent, an action log's tool and
// target, a reason): a control character in it could move the cursor,
// erase or hide lines, add a line or a table column, or reorder what is
// shown around it, and so show a support lead a row the record does not
// hold. Control names those characters; Escape shows them instead of
// letting them act; Find is what the ledger refuses in new input.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Control reports whether r acts on how a terminal shows the text around
// it rather than being shown: a C0 control character (tab, line feed and
// carriage return among them), DEL, a C1 control character (U+0080 to
// U+009F), a bidirectional embedding, override or isolate (U+202A to
// U+202E, U+2066 to U+2069), or the line or paragraph separator (U+2028,
// U+2029).
func Control(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Escape returns s with each Control character, and each byte that is
// not UTF-8, written as Go writes it in a quoted string: \t, \n, \r,
// \x1b, \x7f, \u0085, \u202e, \xff. Text without one is returned as it
// is (a backslash stays a backslash). What Escape returns holds no tab
// or line feed: it adds no column to a table and no line to a listing.
func Escape(s string) string { return escape(s, keepNone) }

// EscapeLines is Escape that keeps line feeds: for text of several lines
// that is printed as lines (a drill's reply to the customer).
func EscapeLines(s string) string { return escape(s, keepLF) }

// EscapeMarkup is Escape that keeps tabs, line feeds and carriage
// returns: for a web page, whose markup lays these out as spaces (a
// value holding one cannot add a line or a cell to what is drawn), while
// a bidirectional control or an invisible character acts there as it
// does on a terminal.
func EscapeMarkup(s string) string { return escape(s, keepSpace) }

// What escape keeps as it is.
const (
	keepNone  = iota
	keepLF    // line feeds
	keepSpace // tabs, line feeds and carriage returns
)

func escape(s string, keep int) string {
	if !needs(s, keep) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case kept(r, keep):
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < utf8.RuneSelf && Control(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case (Control(r) || Invisible(r)) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case Control(r) || Invisible(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// kept reports whether escape keeps the control character r as it is.
func kept(r rune, keep int) bool {
	switch keep {
	case keepLF:
		return r == '\n'
	case keepSpace:
		return r == '\n' || r == '\t' || r == '\r'
	}
	return false
}

// needs reports whether s holds anything escape would change.
func needs(s string, keep int) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && !kept(rune(c), keep) || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || Control(r) || Invisible(r) {
			return true
		}
		i += n
	}
	return false
}

// Invisible reports whether r is drawn as nothing, or as a blank while
// it is no space, so that a value holding it looks like another: a
// Unicode format character (category Cf: a zero-width space, a direction
// mark, the byte order mark, a soft hyphen, a tag character), bar the
// zero-width joiner and non-joiner that scripts and emoji need, and the
// Hangul fillers, letters drawn as a blank. A name (an id, a target)
// holding one is refused; shown, each is escaped like a Control one.
func Invisible(r rune) bool {
	switch r {
	case 0x200c, 0x200d:
		return false
	case 0x115f, 0x1160, 0x3164, 0xffa0:
		return true
	}
	return r >= 0xad && unicode.Is(unicode.Cf, r)
}

// Find returns the byte offset of the first character of s that a
// ledger field may not hold, or -1 when there is none: any Control or
// Invisible character in a name (an id, a tool, a target); in free text
// (a reason, a note), any Control character but a tab, a line feed and a
// carriage return just before a line feed (a line break as a form sends
// it). Free text keeps the Invisible ones (a direction mark in text of a
// right-to-left script, say); shown, they are escaped.
func Find(s string, text bool) int {
	for i, r := range s {
		if !Control(r) && (text || !Invisible(r)) {
			continue
		}
		if text && (r == '\t' || r == '\n' || r == '\r' && strings.HasPrefix(s[i+1:], "\n")) {
			continue
		}
		return i
	}
	return -1
}

// csvSplits are the characters a spreadsheet may split a CSV line at
// inside a cell: another locale's list separator (";"), a file read as
// text with another separator (a comma or a tab), a line break. Go's CSV
// writer quotes a cell for some of them, not for all, and a spreadsheet
// does not always read a quoted cell whole.
const csvSplits = ",;\t\r\n"

// CSVCell is cell as a CSV file's cell no spreadsheet reads as a
// formula: an apostrophe goes before it when it could start one
// (Formula), and after each character a spreadsheet may split it at
// (csvSplits) where the part that follows could (OWASP's advice on CSV
// injection, for every cell a spreadsheet may make of it). A cell no part
// of which could start a formula is left as it is.
func CSVCell(cell string) string {
	var b strings.Builder
	if Formula(cell) {
		b.WriteByte('\'')
	}
	from := 0
	mark := func(at int) {
		b.WriteString(cell[from:at])
		b.WriteByte('\'')
		from = at
	}
	part := -1 // where the part being read starts, past a split; -1: none is open
	for i := 0; i < len(cell); {
		r, n := utf8.DecodeRuneInString(cell[i:])
		switch {
		case strings.IndexByte(csvSplits, cell[i]) >= 0:
			if part == i && (cell[i] == '\t' || cell[i] == '\r') {
				mark(part) // a part that starts with a tab or a carriage return
			}
			part = i + 1
		case part < 0 || unicode.IsSpace(r) || r == '"': // a quote opens a quoted cell
		case strings.ContainsRune(formulaStarts, r):
			mark(part)
			part = -1
		default:
			part = -1
		}
		i += n
	}
	if b.Len() == 0 {
		return cell
	}
	b.WriteString(cell[from:])
	return b.String()
}

// formulaStarts are the characters a formula starts with, in either
// width.
const formulaStarts = "=+-@＝＋－＠"

// Formula reports whether a spreadsheet that opens a CSV file could read
// cell as a formula: its first character, past any leading spaces, is
// = + - or @ (or their full-width forms), or the cell starts with a tab
// or a carriage return. Such a cell is written with a leading
// apostrophe (OWASP's advice on CSV injection); "-" alone, a word for
// none, is no formula.
func Formula(cell string) bool {
	if cell == "" || cell == "-" {
		return false
	}
	if cell[0] == '\t' || cell[0] == '\r' {
		return true
	}
	for _, r := range cell {
		switch {
		case unicode.IsSpace(r):
			continue
		case strings.ContainsRune(formulaStarts, r):
			return true
		}
		return false
	}
	return false
}
