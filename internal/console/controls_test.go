package console_test

import (
	"context"
	"html"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger"
)

// A refusal recorded before the ledger refused control and invisible
// characters in a writer's names holds them still. The console's pages
// show each escaped, as ledgerctl prints it: a right-to-left override in
// the claimed agent cannot reorder the cell, a zero-width space cannot
// make one order id look like another, and a line break is laid out as
// a space by the markup.
func TestStoredControlCharactersAreShownEscaped(t *testing.T) {
	const (
		agent  = "pa.example\u202eelpmaxe.ap\u2066"
		target = "A-5531\u200b"
		tool   = "cancel_order\u3164\x1b[8m"
		reason = "no receipt\u2028\u0085\x1b]8;;https://evil.example\x07here"
	)
	var id string
	e := newEnv(t, func(e *env) {
		id = refuseBefore(t, e, ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: "RT", Tool: "cancel_order", Target: "A-5531",
			Reason: "no receipt", ObservedAt: time.Now().Add(-time.Minute)}, func(r *ledger.Row) {
			r.Refusal.ClaimedAgent, r.Agent.Platform, r.Refusal.Reason = agent, agent, reason
			r.Actions[0].Tool, r.Actions[0].Target = tool, target
		})
	})
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	for _, page := range []string{"/console/search?by=principal&q=acct-48213", "/console/rows/" + id} {
		code, body := c.get(t, page)
		if code != http.StatusOK {
			t.Fatalf("%s = %d:\n%s", page, code, body)
		}
		for i, r := range body {
			if (termtext.Control(r) || termtext.Invisible(r)) && !strings.ContainsRune("\t\n\r", r) {
				t.Fatalf("%s shows %U raw at byte %d: %q", page, r, i, body[max(0, i-80):min(len(body), i+80)])
			}
		}
		text := html.UnescapeString(body)
		for _, want := range []string{`pa.example\u202eelpmaxe.ap\u2066`, `A-5531\u200b`, `cancel_order\u3164\x1b[8m`} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not show %s:\n%s", page, want, text)
			}
		}
		if strings.HasPrefix(page, "/console/rows/") && !strings.Contains(text, `no receipt\u2028\u0085\x1b]8;;https://evil.example\x07here`) {
			t.Errorf("%s does not show the reason escaped:\n%s", page, text)
		}
	}
}

// refuseBefore records a refusal in the data directory before ledgerd
// starts, then edits the stored row with edit, as a ledger of before the
// write-side checks could have stored it. It returns the row's id.
func refuseBefore(t *testing.T, e *env, in ledger.RefusalInput, edit func(r *ledger.Row)) string {
	t.Helper()
	l, store := e.ledgerBefore(t, time.Now())
	row, err := l.AppendRefusal(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Apply(filepath.Join(e.cfg.DataDir, "ledger.db"), tamper.EditRow(row.ID, edit)); err != nil {
		t.Fatal(err)
	}
	return row.ID
}
