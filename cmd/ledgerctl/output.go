package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strings"
)

// listing is a command's list output: a header and its rows, printed as
// an aligned table or as CSV (--output csv).
type listing struct {
	header []string
	rows   [][]string
}

// printList prints l as CSV, or as a table with an upper-case header;
// empty is what the table says when there are no rows.
func (c *cli) printList(l listing, empty string) error {
	if c.output == "csv" {
		w := csv.NewWriter(c.out)
		if err := w.Write(l.header); err != nil {
			return err
		}
		if err := w.WriteAll(l.rows); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		return nil
	}
	if len(l.rows) == 0 {
		if empty != "" {
			fmt.Fprintln(c.out, empty)
		}
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, strings.ToUpper(strings.Join(l.header, "\t")))
	for _, r := range l.rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// note prints a line about the output (a count, a hint) where it does not
// spoil it: after a table, or on stderr beside CSV.
func (c *cli) note(format string, args ...any) {
	if c.output == "csv" {
		fmt.Fprintf(c.errw, format+"\n", args...)
		return
	}
	fmt.Fprintf(c.out, format+"\n", args...)
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
