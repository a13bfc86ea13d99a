package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The row page offers the row's Merkle log proof; the downloaded file
// verifies offline with the log's key.
func TestProofDownloadVerifies(t *testing.T) {
	e := newEnv(t, nil)
	row := e.record(t, e.sc.Mint(pacttest.Spec{Target: "P-1"}))
	c := e.newWebClient(t)
	c.signIn(t, "auditor")
	if _, page := c.get(t, "/console/rows/"+row.GetId()); !strings.Contains(page, "/console/rows/"+row.GetId()+"/proof") {
		t.Fatal("the row page offers no proof download")
	}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b := c.get(t, "/console/rows/"+row.GetId()+"/proof")
		if code == 200 {
			body = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proof download = %d %s", code, b)
		}
		time.Sleep(20 * time.Millisecond) // the log is extended every half second
	}
	cp, err := e.client.GetCheckpoint(context.Background(), &ledgerv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proof.ParseBundle([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(cp.GetVerifierKey()); err != nil || b.RowID != row.GetId() {
		t.Fatalf("downloaded proof: %v", err)
	}
}
