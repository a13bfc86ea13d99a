package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// evidenceDiffs binds the evidence the server returns for row p (ev) to
// the row's leaf here, not on the server's word, and compares the row's
// fields with it.
//
// The leaf commits to the row's tokens by their canonical hashes and to
// the whole bundle by its hash, but not to the fields the write path took
// from them (principal, grant, brand, agent, scopes, each action's tool,
// target and args hash): an operator who edits those in the row store
// leaves the leaf, and the evidence hash the server states, as they were.
// So each returned token is hashed against the leaf's receipt, request
// and token lines; the bundle is rebuilt from the returned tokens and
// action log entries and the input the row keeps (a receipt's limits, a
// refusal's claimed principal and agent, action, reason and observedAt),
// encoded as the ledger encodes it and hashed against the leaf's evidence
// line; and the row's fields are read again from that bundle as fsck
// reads them (ledger.EvidenceDiffs). A row's target from the action log
// alone is bound by the bundle's hash, one from the signed args by the
// receipt's hash too.
func evidenceDiffs(ctx context.Context, leaf map[string]string, p *ledgerv1.Row, ev *ledgerv1.GetEvidenceResponse) ([]string, error) {
	given := ledger.Evidence{ReceiptJWS: ev.GetReceiptJws(), RequestJWT: ev.GetRequestJwt(), DelegationToken: ev.GetDelegationToken()}
	for _, a := range ev.GetActions() {
		given.Actions = append(given.Actions, verifier.Action{Tool: a.GetTool(), Target: a.GetTarget(), ArgsJSON: a.GetArgsJson()})
	}
	r := ledgerRow(p)
	want := strings.TrimPrefix(leaf["evidence"], "sha256:")
	written, sum, err := ledger.WrittenEvidence(r, given, want)
	if err != nil {
		return nil, err
	}
	var d []string
	receipt, request, token := ledger.LeafTokenDigests(written)
	for _, t := range []struct{ line, what, got string }{
		{"receipt", "receipt", receipt}, {"request", "request JWT", request}, {"token", "delegation token", token},
	} {
		if t.got != leaf[t.line] {
			d = append(d, fmt.Sprintf("the %s the server returns as the row's evidence hashes to %s, the leaf's %s line says %s", t.what, t.got, t.line, dash(leaf[t.line])))
		}
	}
	if sum != want {
		d = append(d, fmt.Sprintf("the evidence the server returns, with the row's %s, encodes to a bundle of sha256:%s, the leaf says %s: the tokens or action log entries returned, or those values of the row, are not those written",
			keptInput(r), sum, dash(leaf["evidence"])))
	}
	if len(d) > 0 {
		// Fields read from evidence the leaf does not commit to prove
		// nothing either way.
		return d, nil
	}
	return append(d, ledger.EvidenceDiffs(ctx, r, written, want)...), nil
}

// keptInput names the part of the write's input a row keeps and the
// server does not return with its evidence.
func keptInput(r *ledger.Row) string {
	if r.Kind == ledger.KindRefusal {
		return "claimed principal and agent, action, reason and observedAt"
	}
	return "limits"
}

// ledgerRow is the part of row p that its evidence gives or that the
// evidence is rebuilt from (ledger.WrittenEvidence, ledger.EvidenceDiffs).
func ledgerRow(p *ledgerv1.Row) *ledger.Row {
	r := &ledger.Row{
		ID:             p.GetId(),
		ReceiptID:      p.GetReceiptId(),
		Kind:           ledger.KindReceipt,
		GrantID:        p.GetGrantId(),
		Principal:      p.GetPrincipal(),
		Brand:          p.GetBrand(),
		Agent:          ledger.Agent{Platform: p.GetAgent().GetPlatform(), RequestJWTKid: p.GetAgent().GetRequestJwtKid(), JWKSSnapshot: p.GetAgent().GetJwksSnapshot()},
		BrandKey:       ledger.BrandKey{Kid: p.GetBrandKey().GetKid(), JWKSSnapshot: p.GetBrandKey().GetJwksSnapshot()},
		ScopeGranted:   p.GetScopeGranted(),
		ScopesUsed:     p.GetScopesUsed(),
		Limits:         ledger.Limits{AmountMax: p.GetLimits().GetAmountMax(), CountMax: int(p.GetLimits().GetCountMax())},
		EvidenceSHA256: p.GetEvidenceSha256(),
	}
	if p.GetKind() == ledgerv1.RowKind_ROW_KIND_REFUSAL {
		r.Kind = ledger.KindRefusal
	}
	if t := p.GetLimits().GetGrantExpires(); t != nil {
		r.Limits.GrantExpires = t.AsTime()
	}
	if t := p.GetIssuedAt(); t != nil {
		r.IssuedAt = t.AsTime()
	}
	if t := p.GetRecordedAt(); t != nil {
		r.RecordedAt = t.AsTime()
	}
	for _, a := range p.GetActions() {
		r.Actions = append(r.Actions, verifier.RowAction{Tool: a.GetTool(), Target: a.GetTarget(), ArgsHash: a.GetArgsHash(),
			HashSource: hashSourceOf[a.GetArgsHashSource()], TargetSource: targetSourceOf[a.GetTargetSource()]})
	}
	for _, c := range p.GetVerifier().GetChecks() {
		r.Verifier.Checks = append(r.Verifier.Checks, verifier.Check{Name: c.GetName(), Result: checkResultOf[c.GetResult()], Detail: c.GetDetail()})
	}
	if rf := p.GetRefusal(); rf != nil {
		r.Refusal = &ledger.Refusal{ClaimedPrincipal: rf.GetClaimedPrincipal(), ClaimedAgent: rf.GetClaimedAgent(), Reason: rf.GetReason()}
	}
	return r
}

var (
	hashSourceOf = map[ledgerv1.ArgsHashSource]verifier.HashSource{
		ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_RECEIPT:            verifier.HashFromReceipt,
		ledgerv1.ArgsHashSource_ARGS_HASH_SOURCE_COMPUTED_BY_LEDGER: verifier.HashComputedByLedger,
	}
	targetSourceOf = map[ledgerv1.TargetSource]verifier.TargetSource{
		ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS: verifier.TargetFromSignedArgs,
		ledgerv1.TargetSource_TARGET_SOURCE_WRITER:      verifier.TargetFromWriter,
	}
	checkResultOf = map[ledgerv1.CheckResult]verifier.Outcome{
		ledgerv1.CheckResult_CHECK_RESULT_PASS:    verifier.Pass,
		ledgerv1.CheckResult_CHECK_RESULT_FAIL:    verifier.Fail,
		ledgerv1.CheckResult_CHECK_RESULT_SKIPPED: verifier.Skipped,
	}
)
