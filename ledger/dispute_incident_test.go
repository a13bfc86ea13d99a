package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A dispute resolved as an incident names the row's incident: the ledger
// refuses it for a row it did not record as one, whoever calls it, and
// records nothing.
func TestADisputeIsResolvedAsAnIncidentOnlyOnAnIncidentsRow(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
	if row.IncidentID != "" {
		t.Fatalf("the row names incident %s", row.IncidentID)
	}
	_, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeResolvedIncident, "ours", "support-key")
	if !errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "names no incident") {
		t.Fatalf("resolved as an incident on an authorized row: %v; want a conflict naming no incident", err)
	}
	got, err := h.l.Get(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.DisputeEvents) != 0 || got.Dispute != row.Dispute {
		t.Fatalf("the refused resolution was recorded: %+v", got.DisputeEvents)
	}
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeResolvedOther, "answered", "support-key"); err != nil {
		t.Fatalf("resolved as other: %v", err)
	}
}
