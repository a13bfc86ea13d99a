package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pactledger/pactledger/internal/termtext"
)

// printf is fmt.Fprintf for what ledgerctl prints for a person to read:
// a table's rows, a line of a record, a note, an error. The format is
// ledgerctl's own; the text its arguments hold is ledgerd's answer, and
// much of that is a writer's words (a refusal's claimed principal and
// agent, an action log's tool and target, a reason), which may hold
// control characters. Each string and error argument is printed
// termtext.Escape'd: an escape sequence, a carriage return or a
// bidirectional override is shown as \x1b, \r or \u202e instead of
// acting on the terminal, and a tab or a line feed as \t or \n, so that
// no value adds a column to a table or a line to a listing; a multiline
// argument keeps its line feeds. JSON (--output json) and CSV are not
// written through printf: they carry the values as they are.
func printf(w io.Writer, format string, args ...any) {
	shown := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			shown[i] = termtext.Escape(v)
		case multiline:
			shown[i] = termtext.EscapeLines(string(v))
		case error:
			shown[i] = termtext.Escape(v.Error())
		default:
			shown[i] = a
		}
	}
	fmt.Fprintf(w, format, shown...)
}

// multiline is text of several lines that printf prints as lines (a
// drill's reply to the customer): its line feeds are kept, every other
// control character escaped.
type multiline string

// listing is a command's list output: a header and its rows, printed as
// an aligned table or as CSV (--output csv).
type listing struct {
	header []string
	rows   [][]string
}

// printList prints l as CSV, each cell kept from reading as a formula
// (csvSafe), or as a table with an upper-case header, each cell printed
// escaped (printf); empty is what the table says when there are no rows.
func (c *cli) printList(l listing, empty string) error {
	if c.output == "csv" {
		w := csv.NewWriter(c.out)
		if err := w.Write(l.header); err != nil {
			return err
		}
		for _, r := range l.rows {
			if err := w.Write(csvSafe(r)); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		return nil
	}
	if len(l.rows) == 0 {
		if empty != "" {
			printf(c.out, "%s\n", empty)
		}
		return nil
	}
	w := c.table()
	header := make([]string, len(l.header))
	for i, h := range l.header {
		header[i] = strings.ToUpper(h)
	}
	cells(w, header...)
	for _, r := range l.rows {
		cells(w, r...)
	}
	return w.Flush()
}

// csvSafe keeps a spreadsheet from reading a cell of --output csv as a
// formula, as the console's grant export does (termtext.CSVCell): a cell
// a spreadsheet could read as one (= + - @ first, past any spaces, in
// either width, or a tab or a carriage return; a writer's target, tool or
// agent, say) gets a leading apostrophe (OWASP's advice on CSV
// injection), and so does each part of a cell a spreadsheet could split
// off (after a ; , tab or line break) that could. "-" alone, ledgerctl's
// word for none, is no formula and is left as it is, as are ids and
// times, which start with a digit or a letter.
func csvSafe(rec []string) []string {
	out := make([]string, len(rec))
	for i, c := range rec {
		out[i] = termtext.CSVCell(c)
	}
	return out
}

// cells prints one row of a table: each value escaped (printf), so that
// none adds a column or a line, then a tab between values.
func cells(w io.Writer, vs ...string) {
	for i, v := range vs {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		printf(w, "%s", v)
	}
	io.WriteString(w, "\n")
}

// note prints a line about the output (a count, a hint) where it does not
// spoil it: after a table, or on stderr beside CSV.
func (c *cli) note(format string, args ...any) {
	if c.output == "csv" {
		printf(c.errw, format+"\n", args...)
		return
	}
	printf(c.out, format+"\n", args...)
}

// terminalErr reports whether the error stream is a terminal, where
// progress may be written over itself.
func (c *cli) terminalErr() bool {
	f, ok := c.errw.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
