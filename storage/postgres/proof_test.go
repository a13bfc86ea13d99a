package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// On PostgreSQL as on bbolt, a dispute event or an incident closure
// committed but not yet integrated is not yet logged, and a ref to one
// that does not exist is not found.
func TestProofOfAQueuedEvent(t *testing.T) {
	w := newWorld(t)
	r := w.replica(t, "a")
	ctx := t.Context()
	signer, vkey, err := pacttest.LogKey("ledger.test/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	row, _, err := r.l.AppendReceipt(ctx, input(w.sc.Mint(pacttest.Spec{Target: "RO-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	if err != nil {
		t.Fatal(err)
	}
	closed, _, err := r.l.AppendReceipt(ctx, input(w.sc.Mint(pacttest.Spec{Target: "INC-1", ScopesUsed: []string{"plan:change"}})))
	if err != nil || closed.IncidentID == "" {
		t.Fatalf("incident row: %v, incident %q", err, closed.IncidentID)
	}
	open, _, err := r.l.AppendReceipt(ctx, input(w.sc.Mint(pacttest.Spec{Target: "INC-2", ScopesUsed: []string{"plan:change"}})))
	if err != nil || open.IncidentID == "" {
		t.Fatalf("incident row: %v, incident %q", err, open.IncidentID)
	}
	if _, err := r.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "never asked", "support-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.CloseIncident(ctx, closed.IncidentID, "fixed", "admin-key"); err != nil {
		t.Fatal(err)
	}
	dispute0, closure := "dispute/"+row.ID+"/0", "incident/"+closed.IncidentID+"/close"
	for ref, want := range map[string]error{
		dispute0:                   ledger.ErrNotLogged,
		closure:                    ledger.ErrNotLogged,
		"dispute/" + row.ID + "/1": ledger.ErrNotFound,
		"dispute/" + strings.Repeat("0", 64) + "/0": ledger.ErrNotFound,
		"incident/" + open.IncidentID + "/close":    ledger.ErrNotFound,
		"incident/INC-999/close":                    ledger.ErrNotFound,
	} {
		if _, err := r.l.Proof(ctx, ref); !errors.Is(err, want) {
			t.Errorf("Proof(%s): %v, want %v", ref, err, want)
		}
	}
	if _, err := r.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The log is served as far as it is published, as the integrator
	// publishes after each round.
	if err := r.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{dispute0, closure} {
		b, err := r.l.Proof(ctx, ref)
		if err != nil {
			t.Fatalf("%s once integrated: %v", ref, err)
		}
		if _, err := b.Verify(vkey); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
}
