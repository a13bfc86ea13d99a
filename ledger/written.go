package ledger

import (
	"context"
	"fmt"
)

// A row's evidence, checked from outside the ledger.
//
// A row's leaf commits to its evidence bundle by the bundle's hash and to
// its tokens by their canonical hashes, not to the fields the write path
// took from them (the principal, grant, brand, each action's tool, target
// and args hash): fsck and VerifyRow read those again from the bundle.
// A reader that does not trust the ledger (ledgerctl log audit) does the
// same from what the API gives: the bundle's tokens and action log
// entries (GetEvidence), and the row. WrittenEvidence rebuilds the
// bundle, to be hashed against the leaf; LeafTokenDigests gives the
// leaf's token lines; EvidenceDiffs reads the row's fields from it.

// WrittenEvidence is the evidence bundle row r was written from, rebuilt
// from given (the bundle's tokens and action log entries, as GetEvidence
// returns them) and the part of the write's input that the row keeps
// and the API does not return with the bundle: a receipt's limits, a
// refusal's claimed principal and agent, action, reason and observedAt.
// It returns the bundle and the hex SHA-256 of its encoding as the write
// path encodes it (Evidence.AppendJSON): of the reading that hashes to
// want when one does (a receipt posted without limits and one posted
// with empty limits make the same row), else of the first. A hash other
// than want says the tokens, the action log entries or the input the row
// keeps are not those written.
func WrittenEvidence(r *Row, given Evidence, want string) (*Evidence, string, error) {
	var cands []*Evidence
	if r.Kind == KindRefusal {
		in := &RefusalInput{RequestJWT: given.RequestJWT, DelegationToken: given.DelegationToken, ObservedAt: r.IssuedAt.UTC()}
		if rf := r.Refusal; rf != nil {
			in.ClaimedPrincipal, in.ClaimedAgent, in.Reason = rf.ClaimedPrincipal, rf.ClaimedAgent, rf.Reason
		}
		if len(r.Actions) > 0 {
			in.Tool, in.Target = r.Actions[0].Tool, r.Actions[0].Target
		}
		cands = append(cands, &Evidence{Refusal: in})
	} else {
		ev := Evidence{ReceiptJWS: given.ReceiptJWS, RequestJWT: given.RequestJWT, DelegationToken: given.DelegationToken, Actions: given.Actions}
		lim := Limits{AmountMax: r.Limits.AmountMax, CountMax: r.Limits.CountMax}
		if lim == (Limits{}) {
			none := ev
			cands = append(cands, &none)
		}
		ev.Limits = &lim
		cands = append(cands, &ev)
	}
	var first string
	for i, ev := range cands {
		b, err := ev.AppendJSON(nil)
		if err != nil {
			return nil, "", fmt.Errorf("encode the evidence of row %s: %w", r.ID, err)
		}
		sum := sha256Hex(b)
		if sum == want {
			return ev, sum, nil
		}
		if i == 0 {
			first = sum
		}
	}
	return cands[0], first, nil
}

// LeafTokenDigests are the values of a row leaf's receipt, request and
// token lines for evidence ev: the SHA-256 of each token's canonical
// encoding ("sha256:<hex>"), "-" for a token ev does not hold.
func LeafTokenDigests(ev *Evidence) (receipt, request, token string) {
	d := digestsOf(ev)
	return orDash(d.receipt), orDash(d.request), orDash(d.token)
}

// EvidenceDiffs lists where row r's fields differ from those its
// evidence ev (written under the hex SHA-256 evSHA) gives, one a field,
// as fsck does: read the way the write path read them, with no signature
// checked. Each difference ends "the row was edited after it was
// written"; evidence whose fields cannot be read is one difference that
// says why. The request JWT's hash, which the API does not show, is
// compared only when r holds one.
func EvidenceDiffs(ctx context.Context, r *Row, ev *Evidence, evSHA string) []string {
	return editedFields(ctx, withRequestJWTHash(r, ev), ev, evSHA, nil)
}

// withRequestJWTHash is row r as the API shows it, which leaves out the
// request JWT's hash, with the hash of the request JWT of its evidence
// ev: so that it is compared only when r holds one.
func withRequestJWTHash(r *Row, ev *Evidence) *Row {
	if r.RequestJWTSHA256 != "" || ev.Refusal != nil || ev.RequestJWT == "" {
		return r
	}
	c := *r
	c.RequestJWTSHA256 = sha256Hex([]byte(ev.RequestJWT))
	return &c
}
