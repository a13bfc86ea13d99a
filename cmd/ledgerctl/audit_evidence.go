package main

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/ledgerpb"
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
// reads them. A row's target from the action log alone is bound by the
// bundle's hash, one from the signed args by the receipt's hash too.
//
// Then the row's checks are run again here (reverify): the signatures
// with the keys of the JWKS snapshots the leaf names, each bound to it
// by its hash, so that a row the ledger logged as authorized is one
// whose tokens its signers' keys verify, on no server's word.
func (a *auditor) evidenceDiffs(ctx context.Context, leaf map[string]string, p *ledgerv1.Row, ev *ledgerv1.GetEvidenceResponse) ([]string, error) {
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
	return a.reverify(ctx, leaf, r, written, sum)
}

// reverify runs row r's checks again on its evidence ev (bound to its
// leaf: the bundle hashes to sum, the leaf's evidence line) with the keys
// of the JWKS snapshots the leaf's jwks line names, fetched and hashed
// against it (ledger.Reverify), and lists what differs from the row: a
// check's result, or a field of the row against the evidence. A snapshot
// the server does not give, or gives other bytes for, is a difference
// of its own, and the checks are not run without it: the row's fields
// are then compared with the evidence as fsck reads them, no signature
// checked (ledger.EvidenceDiffs).
func (a *auditor) reverify(ctx context.Context, leaf map[string]string, r *ledger.Row, ev *ledger.Evidence, sum string) ([]string, error) {
	var d []string
	var snaps [2]*verifier.Snapshot
	ids := strings.Fields(leaf["jwks"])
	for i, owner := range []string{"brand", "agent"} {
		if i >= len(ids) || ids[i] == "-" {
			continue
		}
		s, problem, err := a.snapshot(ctx, ids[i])
		if err != nil {
			return nil, err
		}
		if problem != "" {
			d = append(d, fmt.Sprintf("the %s's JWKS snapshot %s its leaf names %s: its checks were not run again here", owner, ids[i], problem))
		}
		snaps[i] = s
	}
	if len(d) > 0 {
		return append(d, ledger.EvidenceDiffs(ctx, r, ev, sum)...), nil
	}
	rv := ledger.Reverify(ctx, a.verifier, r, ev, sum, snaps[0], snaps[1])
	a.reverified++
	if rv.Same && r.Kind == ledger.KindReceipt {
		a.notePassedKeys(r, ev, rv, snaps)
	}
	edited := make(map[string]bool, len(rv.Edited))
	for _, e := range rv.Edited {
		edited[e] = true
	}
	for _, diff := range rv.Differences {
		if !edited[diff] {
			diff = "run again here with the keys of the JWKS snapshots its leaf names, " + diff
		}
		d = append(d, diff)
	}
	return d, nil
}

// signingKey is a key the rows an audit ran again passed a signature
// check with: whose (its role and the signer's URL), from where the
// ledger fetched the snapshot holding it, its kid and its RFC 7638
// thumbprint.
type signingKey struct{ role, signer, source, kid, thumbprint string }

// maxKeysShown bounds the keys an audit prints, and the audiences and
// issuers. An honest ledger's rows pass with a few keys a brand or
// agent; more than this is a finding of its own.
const maxKeysShown = 1000

// notePassedKeys counts the keys row r's passed signature checks were
// made with: the receipt's and the delegation token's (its brand's
// snapshot), the request JWT's (its agent's).
func (a *auditor) notePassedKeys(r *ledger.Row, ev *ledger.Evidence, rv *ledger.Reverification, snaps [2]*verifier.Snapshot) {
	passed := func(name string) bool {
		return slices.ContainsFunc(rv.Checks, func(c verifier.Check) bool { return c.Name == name && c.Result == verifier.Pass })
	}
	note := func(role, signer, token string, snap *verifier.Snapshot) {
		if snap == nil {
			return
		}
		if a.keys == nil {
			a.keys = map[signingKey]int{}
		}
		kid, tp := signedBy(token, snap.Body)
		a.keys[signingKey{role: role, signer: signer, source: snap.URI, kid: kid, thumbprint: tp}]++
	}
	if passed(verifier.CheckReceiptSignature) {
		note("receipts of brand", r.Brand, ev.ReceiptJWS, snaps[0])
	}
	if passed(verifier.CheckDelegationToken) {
		note("delegation tokens of brand", r.Brand, ev.DelegationToken, snaps[0])
		if c, err := verifier.ParseCompact(ev.DelegationToken); err == nil {
			var claims verifier.TokenClaims
			if json.Unmarshal(c.Payload, &claims) == nil {
				a.noteHeld("delegation tokens of brand " + r.Brand + " issued by " + dash(claims.Iss))
			}
		}
	}
	if passed(verifier.CheckRequestSignature) {
		request, _ := verifier.ReadRequestClaims(ev.RequestJWT)
		iss := request.Iss
		if iss == "" {
			iss = r.Agent.Platform
		}
		note("request JWTs of agent", iss, ev.RequestJWT, snaps[1])
		aud, _ := request.Audience()
		a.noteHeld("request JWTs for the audience " + dash(aud))
	}
}

// noteHeld counts a row's passed check under what it was held to: the
// audience of its request JWT, the issuer of its delegation token. Both
// are the ledger's configuration at the time (audience, brands'
// issuers), which no key vouches for: the auditor compares them with
// what the business runs.
func (a *auditor) noteHeld(what string) {
	if a.held == nil {
		a.held = map[string]int{}
	}
	a.held[what]++
}

// signedBy is the kid and RFC 7638 SHA-256 thumbprint (base64url) of
// the key of JWKS body that verifies token: each key the token's kid
// names, or every key when it names none, is tried, so the key shown is
// the one that signed, whatever other keys share its kid. "-" for a
// token no key of body verifies.
func signedBy(token string, body []byte) (kid, thumbprint string) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if json.Unmarshal(body, &set) != nil {
		return "-", "-"
	}
	jws, err := jose.ParseSignedCompact(token, verifier.Algorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return "-", "-"
	}
	named := jws.Signatures[0].Header.KeyID
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) != nil || (named != "" && k.KeyID != named) {
			continue // a key the verifier skips too, or another kid's
		}
		if _, err := jws.Verify(k.Public()); err != nil {
			continue
		}
		tp, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			continue
		}
		return k.KeyID, base64.RawURLEncoding.EncodeToString(tp)
	}
	return "-", "-"
}

// printKeys prints the keys the rows passed their signature checks with,
// most rows first: each is to be compared with the keys its signer
// publishes, since a snapshot holds what the ledger fetched, from where
// its configuration said.
func (a *auditor) printKeys() {
	if len(a.keys) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(a.keys))
	slices.SortFunc(keys, func(x, y signingKey) int {
		if n := a.keys[y] - a.keys[x]; n != 0 {
			return n
		}
		return strings.Compare(x.role+x.signer+x.kid+x.source, y.role+y.signer+y.kid+y.source)
	})
	printf(a.c.out, "keys the rows passed their signature checks with (compare each with the keys its signer publishes: a snapshot holds what the ledger fetched, from where its configuration said):\n")
	for i, k := range keys {
		if i == maxKeysShown {
			printf(a.c.out, "  and %d more keys\n", len(keys)-i)
			break
		}
		printf(a.c.out, "  %s %s: kid %s, thumbprint %s, fetched from %s: %d rows\n", k.role, k.signer, dash(k.kid), k.thumbprint, dash(k.source), a.keys[k])
	}
	held := slices.Sorted(maps.Keys(a.held))
	printf(a.c.out, "what the rows' tokens were held to (compare with the audience and the brands' authorization servers the business runs):\n")
	for i, h := range held {
		if i == maxKeysShown {
			printf(a.c.out, "  and %d more\n", len(held)-i)
			break
		}
		printf(a.c.out, "  %s: %d rows\n", h, a.held[h])
	}
}

// snapshot is the JWKS snapshot of hex SHA-256 id as the server gives
// it, read once an audit: problem says why it cannot be used (not given,
// or bytes of another hash).
func (a *auditor) snapshot(ctx context.Context, id string) (s *verifier.Snapshot, problem string, err error) {
	if got, ok := a.snapshots[id]; ok {
		return got.s, got.problem, nil
	}
	rep, err := a.c.c.GetJwksSnapshot(ctx, &ledgerv1.GetJwksSnapshotRequest{Id: id})
	switch {
	case status.Code(err) == codes.NotFound:
		problem = "is not given by the ledger"
	case err != nil:
		return nil, "", err
	default:
		snap := verifier.NewSnapshot(rep.GetSourceUri(), rep.GetFetchedAt().AsTime(), rep.GetJwks())
		if snap.ID != id {
			problem = "is given as bytes that hash to " + snap.ID
			break
		}
		s = &snap
	}
	if a.snapshots == nil {
		a.snapshots = map[string]heldSnapshot{}
	}
	a.snapshots[id] = heldSnapshot{s: s, problem: problem}
	return s, problem, nil
}

// heldSnapshot is a snapshot read by the audit, or why it cannot be used.
type heldSnapshot struct {
	s       *verifier.Snapshot
	problem string
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
		Status:         ledgerpb.StatusOf[p.GetStatus()],
	}
	r.Verifier.DuplicateOf = p.GetVerifier().GetDuplicateOf()
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
			HashSource: ledgerpb.HashSourceOf[a.GetArgsHashSource()], TargetSource: ledgerpb.TargetSourceOf[a.GetTargetSource()]})
	}
	for _, c := range p.GetVerifier().GetChecks() {
		r.Verifier.Checks = append(r.Verifier.Checks, verifier.Check{Name: c.GetName(), Result: ledgerpb.CheckOf[c.GetResult()], Detail: c.GetDetail()})
	}
	if rf := p.GetRefusal(); rf != nil {
		r.Refusal = &ledger.Refusal{ClaimedPrincipal: rf.GetClaimedPrincipal(), ClaimedAgent: rf.GetClaimedAgent(), Reason: rf.GetReason()}
	}
	return r
}
