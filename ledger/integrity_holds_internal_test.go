package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/retention"
)

// fsck keeps at most maxHeldSwept swept receipts of held grants to check
// against their grants' incidents; those past it are not checked, and
// the check says how many, as a finding of the log.
func TestGrantHoldsSaysHowManySweptRowsItDidNotCheck(t *testing.T) {
	h := &grantHolds{grants: map[string]bool{}, incidents: map[string]incidentOpened{}, closes: map[string]incidentClosed{},
		open: map[string]sweptIncidentRow{}, held: map[string][]sweptGrantedRow{}}
	opened := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h.opened(0, map[string]string{"kind": LeafReceipt, "row": "inc", "status": Incident.String(), "grant": "g", "recorded": opened.Format(time.RFC3339Nano)})
	// Closed long before the sweep: it holds no receipt any more.
	h.closed("inc", opened.AddDate(0, 0, 1).Format(time.RFC3339Nano), []retention.Period{{Months: 12}})
	swept := &Tombstone{SweptAt: opened.AddDate(2, 0, 0)}
	const past = 3
	for i := range maxHeldSwept + past {
		h.swept(int64(i+1), map[string]string{"kind": LeafReceipt, "row": fmt.Sprintf("r%d", i), "status": Authorized.String(), "grant": "g"}, swept)
	}
	// A receipt of a grant no incident holds is not counted.
	h.swept(maxHeldSwept+past+1, map[string]string{"kind": LeafReceipt, "row": "free", "status": Authorized.String(), "grant": "other"}, swept)
	var found []string
	h.check(func(id, format string, args ...any) { found = append(found, id+": "+fmt.Sprintf(format, args...)) })
	if len(found) != 1 || !strings.Contains(found[0], fmt.Sprintf("%d swept receipts of grants an incident holds were not checked", past)) ||
		!strings.Contains(found[0], fmt.Sprintf("the first %d the log holds", maxHeldSwept)) {
		t.Fatalf("findings: %q, want one saying %d rows were not checked", found, past)
	}
}
