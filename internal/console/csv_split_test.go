package console_test

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// A writer chooses a receipt's target. One holding ";=" is inside a cell
// that starts with the tool's name, and Go's CSV writer does not quote a
// cell for ";": a spreadsheet whose locale separates by ";" (de, fr, it,
// es, nl...) splits the cell there, and the part that follows must not
// be a formula. Nor may any part a spreadsheet makes of the export read
// by ";", "," or a tab.
func TestTheGrantExportHasNoFormulaInAnyPartOfACell(t *testing.T) {
	e := newEnv(t, nil)
	r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: `A-5531;=cmd|' /C calc'!A0;`, At: time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)})
	row := e.record(t, r)
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: `A-5532;"=1+1"`, At: time.Date(2026, 10, 7, 13, 13, 44, 0, time.UTC)}))
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAuditor)
	code, body := c.get(t, "/console/grant/export?id="+row.GetGrantId()+"&format=csv")
	if code != 200 || !strings.Contains(body, `A-5531;'=cmd`) {
		t.Fatalf("export = %d, want the target's part after ';' marked as text:\n%s", code, body)
	}
	for _, sep := range []rune{';', ',', '\t'} {
		rd := csv.NewReader(strings.NewReader(body))
		rd.Comma, rd.LazyQuotes, rd.FieldsPerRecord = sep, true, -1
		recs, err := rd.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			for _, cell := range rec {
				if s := strings.TrimLeft(cell, " \""); strings.HasPrefix(s, "=") || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "@") {
					t.Errorf("the export read by %q has a cell a spreadsheet reads as a formula: %q", sep, cell)
				}
			}
		}
	}
}
