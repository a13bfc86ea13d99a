package drill_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// What a writer key (not trusted: docs/design/012) can post must not bend
// the drills.

// forgedCopy returns r with its receipt's signature bytes altered: the same
// claims, request JWT and delegation token, a receipt signature that does
// not verify.
func forgedCopy(t *testing.T, r *pacttest.Receipt) *pacttest.Receipt {
	t.Helper()
	parts := strings.Split(r.ReceiptJWS, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sig[5] ^= 0xff
	parts[2] = base64.RawURLEncoding.EncodeToString(sig)
	c := *r
	c.ReceiptJWS = strings.Join(parts, ".")
	return &c
}

// decisions returns the decision pull of each drilled row, by row id.
func decisions(rep *drill.Report) map[string]drill.Pull {
	m := map[string]drill.Pull{}
	for _, p := range rep.Pulls {
		if p.Name == drill.PullDecision {
			m[p.RowID] = p
		}
	}
	return m
}

// A forged copy of the disputed receipt posted before it, with its request
// JWT, is no original the real receipt replays: the drill decides the real
// row customer-authorized, the copy as a copy of it, and the reply never
// tells the customer there is no verifiable approval.
func TestAForgedCopyPostedFirstDoesNotMakeTheRealReceiptAReplay(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	c := e.append(t, forgedCopy(t, real))
	g := e.append(t, real)
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := decisions(rep)
	if p := d[g.ID]; !p.Passed || !strings.Contains(p.Detail, "customer-authorized") {
		t.Errorf("decision on the real receipt %s: %+v; want customer-authorized", g.ID[:12], p)
	}
	if p := d[c.ID]; !p.Passed || !strings.Contains(p.Detail, "copy of row "+g.ID) {
		t.Errorf("decision on the forged copy %s: %+v; want a copy of row %s", c.ID[:12], p, g.ID[:12])
	}
	if strings.Contains(rep.Reply, "no verifiable approval") || !strings.Contains(rep.Reply, "allowed") {
		t.Errorf("reply %q: want the grant, never \"no verifiable approval\"", rep.Reply)
	}
	if rep.ChecksPassed != rep.ChecksTotal {
		t.Errorf("checks %d/%d; want all passed", rep.ChecksPassed, rep.ChecksTotal)
	}
}
