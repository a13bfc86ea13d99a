package main

import (
	"context"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Text a writer chose, held with control characters (written before the
// ledger refused them, or put in the row store behind its back), is
// printed escaped by every table and listing: no escape sequence, carriage
// return, tab, line feed or bidirectional override reaches the terminal,
// so none can repaint a row, hide one or add a row or a column.
func TestStoredControlCharactersArePrintedEscaped(t *testing.T) {
	const (
		fakeRow   = "9999aaaa0000  2026-12-06 16:17:13Z  authorized    acct-48213  A-5531  cancel_order  https://pa.example  resolved_customer_authorized"
		agent     = "RT\r\x1b[1A\x1b[2K" + fakeRow + "\x1b[1B\r\x1b[2K\x1b[8m"
		target    = "A-5531\n" + fakeRow
		tool      = "cancel\torder\u202e\u200b"
		reason    = "no receipt\x1b]8;;https://evil.example\x07here\x1b]8;;\x07\u2028\u0085"
		note      = "chargeback\r\x1b[2Kresolved"
		incReason = "args_hash: x\x1b[2K\rINC-0 closed\n=HYPERLINK(\"http://evil.example\")"
		rowTarget = "A-5531\x1b[8m"
	)
	f := start(t)
	c, wctx := f.writer(t)
	ref, err := c.AppendRefusal(wctx, &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-48213", ClaimedAgent: "RT",
		Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "no receipt", ObservedAt: timestamppb.New(time.Now().Add(-time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	refID := ref.GetRow().GetId()
	// An incident: a receipt under a grant revoked before it.
	if code, _, errs := f.ctl(t, "writer", "revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:00:00Z"); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	incRow := f.append(t, pacttest.Spec{User: "acct-48213", Target: "A-7777"})
	got, err := c.GetRow(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keys["support"]), &ledgerv1.GetRowRequest{Id: incRow})
	if err != nil || got.GetRow().GetIncidentId() == "" {
		t.Fatalf("the incident's row: %v %v", got, err)
	}
	inc := got.GetRow().GetIncidentId()
	if code, _, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "chargeback"); code != 0 {
		t.Fatalf("dispute open: %s", errs)
	}
	f.edit(t, func(tx *bbolt.Tx) error {
		for _, e := range []func(*bbolt.Tx) error{
			tamper.EditRow(refID, func(r *ledger.Row) {
				r.Refusal.ClaimedAgent, r.Agent.Platform, r.Refusal.Reason = agent, agent, reason
				r.Actions[0].Tool, r.Actions[0].Target = tool, target
				r.Verifier.Checks[0].Detail = "no receipt was presented: " + reason
			}),
			tamper.EditRow(f.rowID, func(r *ledger.Row) {
				r.Actions[0].Target = rowTarget
				r.DisputeEvents[0].Note = note
			}),
			tamper.EditIncident(inc, func(i *ledger.IncidentRecord) { i.Reason = incReason }),
		} {
			if err := e(tx); err != nil {
				return err
			}
		}
		return nil
	})

	for _, cmd := range []struct {
		role string
		args []string
		want []string // as printed: escaped
	}{
		{"support", []string{"lookup", "--principal", "acct-48213"}, []string{`RT\r\x1b[1A\x1b[2K9999aaaa0000`, `A-5531\n9999aaaa0000`, `cancel\torder\u202e\u200b`, `A-5531\x1b[8m`}},
		{"support", []string{"show", refID}, []string{`claimed acct-48213, agent RT\r\x1b[1A`, `no receipt\x1b]8;;https://evil.example\x07here`, `cancel\torder\u202e\u200b A-5531\n9999aaaa0000`, `\u2028\u0085`}},
		{"support", []string{"show", f.rowID}, []string{`chargeback\r\x1b[2Kresolved`, `cancel_order A-5531\x1b[8m`}},
		{"support", []string{"incidents"}, []string{`args_hash: x\x1b[2K\rINC-0 closed\n=HYPERLINK`}},
		{"support", []string{"incidents", inc}, []string{`args_hash: x\x1b[2K\rINC-0 closed\n=HYPERLINK("http://evil.example")`, `A-5531\x1b[8m`}},
		{"support", []string{"grant", "a2agrant_7Q2F"}, []string{`A-5531\x1b[8m`}},
		{"support", []string{"drill", "--row", refID}, []string{`no receipt\x1b]8;;https://evil.example`}},
		{"auditor", []string{"verify", refID}, nil},
		{"auditor", []string{"fsck"}, []string{`A-5531\x1b[8m`}},
		// JSON: the same values to a program, as \u escapes.
		{"support", []string{"show", refID, "--output", "json"}, []string{`cancel\torder\u202e\u200b`, `\u2028\u0085`, `RT\r\u001b[1A`}},
		{"support", []string{"lookup", "--principal", "acct-48213", "--output", "json"}, []string{`cancel\torder\u202e\u200b`}},
	} {
		_, out, errs := f.ctl(t, cmd.role, cmd.args...)
		for _, s := range []string{out, errs} {
			for i, r := range s {
				if r != '\n' && (termtext.Control(r) || termtext.Invisible(r)) {
					t.Errorf("%v printed %U raw at byte %d:\n%s%s", cmd.args, r, i, out, errs)
					break
				}
			}
		}
		for _, w := range cmd.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v does not print %s:\n%s%s", cmd.args, w, out, errs)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "9999aaaa0000") || strings.HasPrefix(l, "INC-0 closed") || strings.HasPrefix(l, "=HYPERLINK") {
				t.Errorf("%v printed a line of the writer's: %q", cmd.args, l)
			}
		}
	}
}
