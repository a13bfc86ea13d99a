package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// LeafVersion is the first line of every leaf of the Merkle log; the
// proof package checks a row's proof by it.
const LeafVersion = proof.LeafVersion

// Leaf kinds.
const (
	LeafReceipt       = "receipt"
	LeafRefusal       = "refusal"
	LeafDispute       = "dispute"
	LeafIncidentClose = "incident-close"
	LeafPolicy        = "policy"
	LeafRevocation    = "revocation"
)

// leafKinds are the kinds of leaf this version writes.
var leafKinds = []string{LeafReceipt, LeafRefusal, LeafDispute, LeafIncidentClose, LeafPolicy, LeafRevocation}

// A leaf is the bytes the log commits to for one row or event: text lines
// "name value", hashes and closed-set values only, never a customer's
// personal data, so that rows swept by retention leave every proof valid.
// Its RFC 6962 leaf hash is SHA-256(0x00 || leaf).
type leaf struct{ b strings.Builder }

func newLeaf(kind string) *leaf {
	l := &leaf{}
	l.b.Grow(leafSize)
	l.b.WriteString(LeafVersion + "\n")
	l.line("kind", kind)
	return l
}

// leafSize is about the length of a row's leaf.
const leafSize = 768

// lineBreaks turns line breaks into spaces (a Replacer is safe for
// concurrent use).
var lineBreaks = strings.NewReplacer("\n", " ", "\r", " ")

func (l *leaf) line(name, value string) *leaf {
	if value == "" {
		value = "-"
	}
	// Values are ids, hashes, times and closed-set names: no line breaks.
	if strings.ContainsAny(value, "\r\n") {
		value = lineBreaks.Replace(value)
	}
	l.b.WriteString(name)
	l.b.WriteByte(' ')
	l.b.WriteString(value)
	l.b.WriteByte('\n')
	return l
}

func (l *leaf) bytes() []byte { return []byte(l.b.String()) }

// digest is "sha256:<hex>" of s, or "" for an empty s.
func digest(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// tokenDigest is the digest of a compact token's canonical encoding, so
// that both ES256 forms of one token commit to the same value.
func tokenDigest(tok string) string { return tokenDigestOf(verifier.ParseToken(tok)) }

// tokenDigestOf is tokenDigest of a token already parsed.
func tokenDigestOf(t verifier.Token) string { return tokenDigestFrom(t, nil) }

// tokenDigestFrom is tokenDigestOf of t whose encodings (t.Encodings())
// are already hashed, or nil. A token Canonical cannot parse is hashed as
// it is.
func tokenDigestFrom(t verifier.Token, encodings []string) string {
	if t.Raw() == "" {
		return ""
	}
	return "sha256:" + t.CanonicalSHA256(encodings)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// tokenDigests are the digests a row's leaf commits to for the tokens
// posted with it; computed before the row's transaction, since they parse
// the tokens.
type tokenDigests struct{ receipt, request, token string }

// digestsOf computes the token digests of a row's evidence (nil: none).
func digestsOf(ev *Evidence) tokenDigests {
	if ev == nil {
		return tokenDigests{}
	}
	request, token := ev.RequestJWT, ev.DelegationToken
	if ev.Refusal != nil {
		request, token = ev.Refusal.RequestJWT, ev.Refusal.DelegationToken
	}
	return tokenDigests{receipt: tokenDigest(ev.ReceiptJWS), request: tokenDigest(request), token: tokenDigest(token)}
}

// rowLeaf is the leaf of a receipt or refusal row: the canonical hashes of
// what was posted, the evidence hash, the JWKS snapshot ids, the grant id's
// hash, the verdict, the class and when it was recorded.
func rowLeaf(r *Row, ev *Evidence) []byte { return rowLeafOf(r, digestsOf(ev)) }

func rowLeafOf(r *Row, d tokenDigests) []byte {
	kind := LeafReceipt
	if r.Kind == KindRefusal {
		kind = LeafRefusal
	}
	l := newLeaf(kind).line("row", r.ID)
	l.line("receipt", d.receipt).line("request", d.request).line("token", d.token)
	l.line("evidence", "sha256:"+r.EvidenceSHA256)
	l.line("jwks", strings.TrimSpace(orDash(r.BrandKey.JWKSSnapshot)+" "+orDash(r.Agent.JWKSSnapshot)))
	l.line("grant", digest(r.GrantID)).line("status", r.Status.String()).line("class", r.Class.String())
	l.line("duplicate-of", r.Verifier.DuplicateOf).line("recorded", stamp(r.RecordedAt))
	return l.bytes()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// disputeLeaf is the leaf of the n-th dispute event of a row.
func disputeLeaf(rowID string, n int, e DisputeEvent) []byte {
	return newLeaf(LeafDispute).line("row", rowID).line("event", fmt.Sprint(n)).line("status", e.Status.String()).
		line("note", digest(e.Note)).line("by", digest(e.By)).line("at", stamp(e.At)).bytes()
}

// incidentCloseLeaf is the leaf of an incident's closure.
func incidentCloseLeaf(inc *IncidentRecord) []byte {
	return newLeaf(LeafIncidentClose).line("incident", inc.ID).line("row", inc.RowID).line("note", digest(inc.Note)).
		line("by", digest(inc.ClosedBy)).line("at", stamp(inc.ClosedAt)).bytes()
}

// revocationLeaf is the leaf of a revocation RevokeGrant recorded (one
// that changed the grant's record): the grant id's hash, as a row's leaf
// holds it (a grant id is the Provider's, carried in the customer's
// tokens, and a leaf outlives the rows retention sweeps), the time it is
// in force from, whether an admin recorded it (the revocation that stops
// the embedded Provider, docs/design/038), the hashes of its note and key
// name, and when it was recorded.
//
// A revocation that carried a Provider's signed statement new for its
// brand (docs/design/045) also holds the hashes of the brand's interface
// URL and of the statement: the revocation the embedded Provider honours
// after a copy of its store from before it is put back.
func revocationLeaf(grant string, at time.Time, admin bool, note, by string, recorded time.Time, st *ProviderStatement) []byte {
	l := newLeaf(LeafRevocation).line("grant", digest(grant)).line("revoked", stamp(at)).line("admin", yesNo(admin)).
		line("note", digest(note)).line("by", digest(by)).line("recorded", stamp(recorded))
	if st != nil {
		l.line("brand", digest(st.Brand)).line("statement", digest(st.Statement))
	}
	return l.bytes()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// policyClasses are the classes a policy leaf records a period for, in
// the order of its lines; the incident period counts from the close.
var policyClasses = []retention.Class{retention.MoneyMoved, retention.AccountChanged, retention.ReadOnly, retention.Refused, retention.Incident}

// policyLeaf is the leaf of the retention periods a ledger started with:
// one line per class, its period as configured ("read_only 90 days"), and
// when it started (docs/design/015).
func policyLeaf(id string, at time.Time, p retention.Policy) []byte {
	l := newLeaf(LeafPolicy).line("policy", id).line("at", stamp(at))
	for _, c := range policyClasses {
		l.line(c.String(), p.Periods[c].String())
	}
	// How long a dispute event keeps its row past the event, and while
	// its dispute is open (AppendDispute, the sweep): the incident period.
	// A policy leaf without this line is a ledger's that did not keep
	// disputed rows so.
	return l.line(policyDisputeLine, p.Periods[retention.Incident].String()).bytes()
}

// policyDisputeLine names a policy leaf's line of the period a dispute
// event keeps its row.
const policyDisputeLine = "dispute"

// policyDisputeHold is the period a policy leaf's dispute line records.
func policyDisputeHold(f map[string]string) (retention.Period, bool) {
	per, err := retention.ParsePeriod(f[policyDisputeLine])
	return per, err == nil
}

// policyPeriods are the periods a policy leaf's lines record, by class;
// a line that does not parse is left out.
func policyPeriods(f map[string]string) map[retention.Class]retention.Period {
	out := map[retention.Class]retention.Period{}
	for _, c := range policyClasses {
		if per, err := retention.ParsePeriod(f[c.String()]); err == nil {
			out[c] = per
		}
	}
	return out
}

// Leaf refs: the key under which the log finds a leaf's index. A row id
// is hex (ValidID), so no other ref is a row's.
func disputeRef(rowID string, n int) string { return fmt.Sprintf("dispute/%s/%d", rowID, n) }
func incidentRef(id string) string          { return "incident/" + id + "/close" }
func policyRef(id string) string            { return "policy/" + id }

// RevocationRef is the ref under which the log holds the leaf of grant's
// revocation as of at, recorded by an admin or not (Proof finds it once
// integrated).
func RevocationRef(grant string, at time.Time, admin bool) string {
	return revocationRef(digest(grant), stamp(at), admin, "", "")
}

// StatedRevocationRef is the ref of the leaf of a revocation of grant as
// of at that carried statement, of brand, new for it.
func StatedRevocationRef(grant string, at time.Time, admin bool, brand, statement string) string {
	return revocationRef(digest(grant), stamp(at), admin, digest(brand), digest(statement))
}

// revocationRef is the ref of a revocation leaf, from its own lines: the
// grant's hash, the time in force and whether an admin recorded it. Each
// revocation logged moves the grant's time (or its admin's time) earlier,
// so no two of a grant's share one; the same revocation recorded again
// (after the row store lost it) is logged once. One that carried a
// statement new for its brand names the hashes of the brand and the
// statement too: a statement moves its brand's time earlier, as an
// admin's revocation its own, and one signed again after a restore lost
// the first (the same time, another signature) is a leaf of its own.
func revocationRef(grantDigest, revoked string, admin bool, brandDigest, statementDigest string) string {
	ref := "revocation/" + strings.TrimPrefix(grantDigest, "sha256:") + "/" + revoked
	if admin {
		ref += "/admin"
	}
	if brandDigest != "" {
		ref += "/stated/" + strings.TrimPrefix(brandDigest, "sha256:") + "/" + strings.TrimPrefix(statementDigest, "sha256:")
	}
	return ref
}

// ParseLeaf splits a leaf into its named values (the first line, the
// version, is checked and dropped). A leaf in which a name appears twice
// is refused (proof.ParseLeaf): the ledger never writes one, and readers
// taking the first line and the last would read two things in it.
func ParseLeaf(data []byte) (map[string]string, error) {
	f, err := proof.ParseLeaf(string(data))
	if err != nil {
		return nil, fmt.Errorf("%w: not a %q leaf: %v", ErrInvalid, LeafVersion, err)
	}
	return f, nil
}
