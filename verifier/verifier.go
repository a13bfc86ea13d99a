package verifier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
)

// Errors the verifier reports. A check's detail carries the wrapped text.
var (
	// ErrMalformed: the input is not a compact JWS or not receipt claims.
	ErrMalformed = errors.New("malformed token")
	// ErrSignature: the signature or its algorithm is not acceptable.
	ErrSignature = errors.New("signature rejected")
	// ErrUnknownKid: no key in the signer's JWKS fits the token's kid and alg.
	ErrUnknownKid = errors.New("unknown kid")
	// ErrUntrusted: the brand or personal agent is not configured, or disabled.
	ErrUntrusted = errors.New("not trusted")
	// ErrFetch: a JWKS or metadata document could not be fetched.
	ErrFetch = errors.New("jwks fetch")
	// ErrBadJWKS: a fetched document is not a usable JWKS or metadata.
	ErrBadJWKS = errors.New("bad jwks")
	// ErrNoSnapshot: a re-verification found no stored snapshot for a signer.
	ErrNoSnapshot = errors.New("no jwks snapshot recorded")
	// ErrUndecided: a signature could not be checked because the signer's
	// keys could not be fetched (no cached set, or an unknown kid whose
	// refetch failed). Verify returns it instead of a result: a check that
	// was not decided must not become a permanent FAIL.
	ErrUndecided = errors.New("verification undecided: signing keys unavailable")
)

// Check names, in the order a record lists them.
const (
	CheckReceiptSignature = "receipt_signature"
	CheckRequestSignature = "request_signature"
	CheckDelegationToken  = "delegation_token"
	CheckBindings         = "bindings"
	CheckScopesWithin     = "scopes_within_grant"
	CheckArgsHash         = "args_hash"
	CheckWithinLimits     = "within_limits"
	CheckDuplicate        = "duplicate"
	CheckGrantNotRevoked  = "grant_not_revoked"
)

// Outcome is the result of one check.
type Outcome int

// Check outcomes.
const (
	Pass Outcome = iota + 1
	Fail
	Skipped
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "PASS"
	case Fail:
		return "FAIL"
	case Skipped:
		return "SKIPPED"
	}
	return "UNSPECIFIED"
}

// Check is one named check with its outcome and detail.
type Check struct {
	Name   string  `json:"name"`
	Result Outcome `json:"result"`
	Detail string  `json:"detail,omitempty"`
}

// Action is one application action log entry.
type Action struct {
	Tool     string `json:"tool"`
	Target   string `json:"target,omitempty"`
	ArgsJSON string `json:"argsJson,omitempty"`
}

// HashSource says who produced an args hash.
type HashSource int

// Args hash sources.
const (
	HashNone HashSource = iota
	HashFromReceipt
	HashComputedByLedger
)

// RowAction is one receipt action as the ledger records it. TargetSource
// says what vouches for Target; rows written before it was recorded have
// none (TargetNotRecorded).
type RowAction struct {
	Tool         string       `json:"tool"`
	Target       string       `json:"target,omitempty"`
	ArgsHash     string       `json:"argsHash,omitempty"`
	HashSource   HashSource   `json:"argsHashSource,omitempty"`
	TargetSource TargetSource `json:"targetSource,omitempty"`
}

// Input is what a pipeline posts with a receipt.
type Input struct {
	ReceiptJWS      string
	RequestJWT      string
	DelegationToken string
	Actions         []Action
}

// Signer is a signer's keys as the verifier trusts them. Issuer, when set,
// is the iss a delegation token signed by these keys must carry.
type Signer struct {
	Keys   *KeySet
	Issuer string
	// Aged: Keys were fetched long enough ago (a Fetcher's MinRefetch) that
	// the signer may have replaced a key under a kid since. A signature the
	// key under its kid does not verify is then refetched for, as an
	// unknown kid is; against keys fetched moments ago it is decided.
	Aged bool
}

// KeySource finds the signing keys of brands and personal agents. It
// returns an error wrapping ErrUntrusted for a brand or agent it does not
// trust. refresh asks for a refetch after an unknown kid.
type KeySource interface {
	Brand(ctx context.Context, interfaceURL string, refresh bool) (Signer, error)
	Agent(ctx context.Context, issuer string, refresh bool) (Signer, error)
}

// GrantedAgentSource is a KeySource that takes some personal agents on a
// brand's word: the verifier asks it, instead of Agent, for the keys of
// the agent whose request JWT came with a delegation token that verified
// against brand's keys (its signature and claims), names brand alone as
// its aud and the request JWT's iss as its client_id: the brand granted
// that agent. It may trust an agent there that Agent does not (the
// embedded Provider's brands under provider.openAgents), and answers as
// Agent for every other brand.
type GrantedAgentSource interface {
	GrantedAgent(ctx context.Context, brand, issuer string, refresh bool) (Signer, error)
}

// agentKeys gives the keys of the personal agent of issuer.
type agentKeys func(ctx context.Context, issuer string, refresh bool) (Signer, error)

// grantedTo returns the keys of personal agents for a request JWT posted
// with a delegation token whose check passed against brand's keys when
// passed is set: src's GrantedAgent for the agent tok names as its
// client_id when src is a GrantedAgentSource and tok names brand alone as
// its aud, src's Agent for any other.
func grantedTo(src KeySource, brand string, tok *TokenClaims, passed bool) agentKeys {
	g, ok := src.(GrantedAgentSource)
	if !ok || !passed || tok == nil || tok.ClientID == "" || brand == "" {
		return src.Agent
	}
	if aud, ok := audience(tok.Aud, true); !ok || len(aud) != 1 || aud[0] != brand {
		return src.Agent
	}
	grantee := tok.ClientID
	return func(ctx context.Context, issuer string, refresh bool) (Signer, error) {
		if issuer != grantee {
			return src.Agent(ctx, issuer, refresh)
		}
		return g.GrantedAgent(ctx, brand, issuer, refresh)
	}
}

// Config configures a Verifier.
type Config struct {
	// Audience is the value PA JWTs must carry in aud (PACT §3.1). Required.
	Audience string
	// Skew is the clock skew allowed; default 30 s.
	Skew time.Duration
	// CheckedBy names the verifier in records, such as "pactledger 1.0.0".
	CheckedBy string
	// CacheSize bounds the cache of verified delegation token signatures
	// (entries, least recently used evicted first); 0 keeps none. A token
	// sent with every turn of a session is then checked once per key set:
	// the cache is keyed by the SHA-256 of the token's bytes, the exact
	// bytes of the key set and the algorithm allow-list, and holds only the
	// signature check. Everything that depends on the receipt runs on
	// every row.
	CacheSize int
	// Metrics, when set, counts the cache's hits, misses and evictions.
	Metrics *CacheMetrics
}

// Verifier checks receipts, request JWTs and delegation tokens as of the
// receipt's ts.
type Verifier struct {
	cfg   Config
	cache *sigCache // nil without Config.CacheSize
}

// New returns a Verifier.
func New(cfg Config) (*Verifier, error) {
	if cfg.Audience == "" {
		return nil, errors.New("verifier: audience is required")
	}
	if cfg.Skew <= 0 {
		cfg.Skew = 30 * time.Second
	}
	if cfg.CheckedBy == "" {
		cfg.CheckedBy = "pactledger"
	}
	if cfg.CacheSize < 0 {
		return nil, errors.New("verifier: cache size must not be negative")
	}
	return &Verifier{cfg: cfg, cache: newSigCache(cfg.CacheSize, cfg.Metrics)}, nil
}

// CheckedBy is the verifier's name for records.
func (v *Verifier) CheckedBy() string { return v.cfg.CheckedBy }

// Result is the verifier's view of one receipt.
type Result struct {
	Receipt       Receipt
	ReceiptKid    string
	BrandSnapshot *Snapshot
	RequestKid    string
	AgentIssuer   string
	AgentSnapshot *Snapshot
	ScopeGranted  []string
	GrantExpires  time.Time
	Actions       []RowAction
	Checks        []Check
}

// Failed reports whether any of the named checks failed.
func (r *Result) Failed(names ...string) bool {
	for _, c := range r.Checks {
		if c.Result == Fail && slices.Contains(names, c.Name) {
			return true
		}
	}
	return false
}

// Parsed is an Input whose tokens were each parsed once (Parse), so that
// Verify and the ledger, which also needs the tokens' encodings, read one
// parse instead of parsing a token again for each use. Only Parse makes
// one: its parts always belong to the same input.
type Parsed struct {
	receipt, request, token Token
	actions                 []Action
	rc                      Receipt
	rcErr                   error
	parsed                  bool
}

// Parse parses each token of in once. A token that does not parse keeps its
// error: for the receipt, Receipt returns it and VerifyParsed fails with it;
// for the request JWT and the delegation token, it is the FAIL check
// VerifyParsed records.
func Parse(in Input) *Parsed {
	p := &Parsed{receipt: ParseToken(in.ReceiptJWS), request: ParseToken(in.RequestJWT), token: ParseToken(in.DelegationToken), actions: in.Actions, parsed: true}
	if c, err := p.receipt.Compact(); err != nil {
		p.rcErr = err
	} else {
		p.rc, _, p.rcErr = receiptOf(c)
	}
	return p
}

// Of reports whether p was parsed from in: the same tokens and actions.
func (p *Parsed) Of(in Input) bool {
	return p != nil && p.parsed && p.receipt.raw == in.ReceiptJWS && p.request.raw == in.RequestJWT &&
		p.token.raw == in.DelegationToken && slices.Equal(p.actions, in.Actions)
}

// Receipt returns the receipt's claims, or ParseReceipt's error for it.
func (p *Parsed) Receipt() (Receipt, error) { return p.rc, p.rcErr }

// ReceiptJWS returns the parsed receipt.
func (p *Parsed) ReceiptJWS() Token { return p.receipt }

// RequestJWT returns the parsed request JWT.
func (p *Parsed) RequestJWT() Token { return p.request }

// DelegationToken returns the parsed delegation token.
func (p *Parsed) DelegationToken() Token { return p.token }

// Verify runs the receipt_signature, request_signature, delegation_token,
// bindings, scopes_within_grant and args_hash checks as of the receipt's ts.
// It returns an error wrapping ErrMalformed only when the receipt cannot be
// parsed at all; every other problem is a FAIL check in the result.
func (v *Verifier) Verify(ctx context.Context, in Input, src KeySource) (*Result, error) {
	return v.VerifyParsed(ctx, Parse(in), src)
}

// VerifyParsed is Verify of the input p was parsed from.
func (v *Verifier) VerifyParsed(ctx context.Context, p *Parsed, src KeySource) (*Result, error) {
	if p == nil || !p.parsed {
		return nil, fmt.Errorf("%w: the input was not parsed", ErrMalformed)
	}
	rc, err := p.Receipt()
	if err != nil {
		return nil, err
	}
	res := &Result{Receipt: rc}
	at := rc.Time

	// receipt_signature: the brand's keys. A refetch started for this
	// verification decides a kid for every token of it the brand signs:
	// asked again (the delegation token under the same kid, within the
	// refetches' rate limit), the key source would answer with the set it
	// brought as an earlier refetch's, and leave the token undecided on
	// every retry.
	var refetched *Signer
	brand := func(refresh bool) (Signer, error) {
		if refresh && refetched != nil {
			return *refetched, nil
		}
		s, err := src.Brand(ctx, rc.Brand, refresh)
		if refresh && err == nil {
			refetched = &s
		}
		return s, err
	}
	rcCheck, rcKeys, err := v.checkReceipt(p.receipt, brand, res)
	if err != nil {
		return nil, err
	}
	res.Checks = append(res.Checks, rcCheck)

	// delegation_token: PACT §5.4 against the brand's keys, the same set
	// as the receipt's: only that one is kept with the row, so a later
	// check of the row finds the token's key in it. It is checked before
	// the request JWT, whose agent the brand may have granted on its own
	// policy (GrantedAgentSource), and recorded after it.
	tok, tokCheck, tokKeys, err := v.checkToken(p.token, at, func(refresh bool) (Signer, error) {
		if !refresh && rcKeys.Keys != nil {
			return rcKeys, nil
		}
		return brand(refresh)
	})
	if err != nil {
		return nil, err
	}
	if tokKeys.Keys != nil && rcKeys.Keys != nil && tokKeys.Keys.Snapshot.ID != rcKeys.Keys.Snapshot.ID {
		// The token's kid brought a newer set: the receipt is checked
		// again against it, and that set is the one kept. A receipt whose
		// outcome that set changes (its key withdrawn in between) waits
		// for the brand's keys to settle.
		again, _, err := v.checkReceipt(p.receipt, func(bool) (Signer, error) { return tokKeys, nil }, res)
		if err != nil {
			return nil, err
		}
		if again.Result != rcCheck.Result {
			return nil, fmt.Errorf("%w: the brand's keys changed between the receipt's check and the delegation token's (receipt_signature %s, then %s)", ErrUndecided, rcCheck.Result, again.Result)
		}
		res.Checks[0] = again
	}

	// request_signature: PACT §3.2.
	reqClaims, reqCheck, err := v.checkRequest(ctx, p.request, at, forReceipt, grantedTo(src, rc.Brand, tok, tokCheck.Result == Pass), res)
	if err != nil {
		return nil, err
	}
	res.Checks = append(res.Checks, reqCheck, tokCheck)
	if tok != nil {
		res.ScopeGranted = tok.Scopes()
		if tok.Exp != nil && tokCheck.Result == Pass {
			res.GrantExpires = tok.Exp.Time()
		}
	}

	res.Checks = append(res.Checks, checkBindings(rc, reqClaims, tok))
	res.Checks = append(res.Checks, checkScopes(rc, tok))
	actions, argsCheck := checkArgs(rc.Actions, p.actions)
	res.Actions = actions
	res.Checks = append(res.Checks, argsCheck)
	return res, nil
}

func fail(name, format string, args ...any) Check {
	return Check{Name: name, Result: Fail, Detail: fmt.Sprintf(format, args...)}
}

// signatureCheck verifies a compact token against a key set (verifyCompact,
// or the same through the signature cache).
type signatureCheck func(tok string, ks *KeySet) ([]byte, string, jose.SignatureAlgorithm, error)

// verifySigned verifies tok with check and the keys get returns, refetching
// once on an unknown kid, or a signature the key under its kid does not
// verify in keys fetched a while ago (Signer.Aged: a signer that replaced
// its key under the same kid, and the cached set still holds the old
// one). A set refetched since the one checked decides a kid it holds,
// whether or not the refetch started for this call: a forged signature
// is decided as before, by the newest set, and a flood of them makes no
// more refetches than the rate limit and the age allow. It
// returns an error wrapping ErrUndecided when the keys could not be
// fetched (get failed with ErrFetch, or the refetch did): the signature
// is then neither good nor bad.
func verifySigned(tok string, check signatureCheck, get func(refresh bool) (Signer, error)) ([]byte, string, string, Signer, error) {
	s, err := get(false)
	if err != nil {
		return nil, "", "", s, undecided(err)
	}
	p, kid, alg, err := check(tok, s.Keys)
	// A signature the key under its kid does not verify: decided by the
	// cached set when no newer one can be had.
	badUnderKid := !keyNotFound(err, kid) && errors.Is(err, errNoKeyVerifies)
	if keyNotFound(err, kid) || (s.Aged && badUnderKid) {
		s2, err2 := get(true)
		switch {
		case badUnderKid && errors.Is(err2, ErrFetch) && s2.Keys == nil:
			// The endpoint does not answer: the set as cached decides, as
			// it did before it was asked again.
		case err2 == nil:
			s = s2
			p, kid, alg, err = check(tok, s.Keys)
		case errors.Is(err2, ErrFetch) && s2.Keys != nil:
			// A newer set than the one checked, but not one fetched
			// after this kid was seen: it decides a kid it holds, and a
			// kid it holds a key of another algorithm under (a kid names
			// one key; another algorithm under it is not this key).
			p2, kid2, alg2, err3 := check(tok, s2.Keys)
			if keyNotFound(err3, kid) && (kid == "" || !s2.Keys.hasKid(kid)) {
				return nil, kid, string(alg), s, fmt.Errorf("%w: kid %q is not in the cached keys and %v", ErrUndecided, kid, err2)
			}
			s, p, kid, alg, err = s2, p2, kid2, alg2, err3
		case errors.Is(err2, ErrFetch):
			return nil, kid, string(alg), s, fmt.Errorf("%w: kid %q is not in the cached keys and %v", ErrUndecided, kid, err2)
		}
	}
	return p, kid, string(alg), s, err
}

// keyNotFound reports whether err, a signature check's, says the set
// has no key for the token: its kid is unknown, or it names none and no
// key of its algorithm verifies it. A refetch may bring the key.
func keyNotFound(err error, kid string) bool {
	return errors.Is(err, ErrUnknownKid) || (kid == "" && errors.Is(err, errNoKeyVerifies))
}

// undecided marks a key-source error that leaves a check undecided.
func undecided(err error) error {
	if errors.Is(err, ErrFetch) {
		return fmt.Errorf("%w: %v", ErrUndecided, err)
	}
	return err
}

// decided splits a verifySigned error: ErrUndecided is returned as an error,
// anything else becomes the FAIL check the caller records.
func decided(err error) (undecidedErr error) {
	if errors.Is(err, ErrUndecided) {
		return err
	}
	return nil
}

// checkReceipt checks the receipt's signature against the keys brand
// gives; it returns the signer whose keys it was checked against.
func (v *Verifier) checkReceipt(jws Token, brand func(refresh bool) (Signer, error), res *Result) (Check, Signer, error) {
	_, kid, alg, s, err := verifySigned(jws.Raw(), jws.check, brand)
	if u := decided(err); u != nil {
		return Check{}, s, u
	}
	if s.Keys != nil {
		snap := s.Keys.Snapshot
		res.BrandSnapshot = &snap
	}
	res.ReceiptKid = kid
	if err != nil {
		return fail(CheckReceiptSignature, "%v", err), s, nil
	}
	return Check{Name: CheckReceiptSignature, Result: Pass, Detail: string(alg) + " kid " + kid}, s, nil
}

// unverifiedClaims decodes the claims of a compact token before its
// signature is checked, to learn whom to check it against. It returns the
// failed check when the token is absent or cannot be decoded.
func unverifiedClaims(check, what string, tok Token, dst any) (Compact, *Check) {
	if tok.Raw() == "" {
		c := fail(check, "no %s was posted", what)
		return Compact{}, &c
	}
	c, err := tok.Compact()
	if err != nil {
		f := fail(check, "%v", err)
		return Compact{}, &f
	}
	if err := json.Unmarshal(c.Payload, dst); err != nil {
		f := fail(check, "claims are not a JSON object")
		return c, &f
	}
	return c, nil
}

func (v *Verifier) checkRequest(ctx context.Context, tok Token, at time.Time, use tokenUse, agent agentKeys, res *Result) (*RequestClaims, Check, error) {
	const name = CheckRequestSignature
	jwt := tok.Raw()
	var claims RequestClaims
	c, problem := unverifiedClaims(name, "request JWT", tok, &claims)
	if problem != nil {
		return nil, *problem, nil
	}
	res.AgentIssuer = claims.Iss
	res.RequestKid = c.Kid
	if claims.Iss == "" {
		return &claims, fail(name, "iss missing"), nil
	}
	payload, kid, alg, s, err := verifySigned(jwt, tok.check, func(refresh bool) (Signer, error) {
		return agent(ctx, claims.Iss, refresh)
	})
	if u := decided(err); u != nil {
		return nil, Check{}, u
	}
	if s.Keys != nil {
		snap := s.Keys.Snapshot
		res.AgentSnapshot = &snap
	}
	if kid != "" {
		res.RequestKid = kid
	}
	if err != nil {
		return &claims, fail(name, "%v", err), nil
	}
	// Claims from the verified payload only from here on.
	var vc RequestClaims
	if err := verifiedClaims(payload, c.Payload, &claims, &vc); err != nil {
		return &claims, fail(name, "%s", claimsProblem(err)), nil
	}
	if detail := v.requestClaimProblem(vc, at, use); detail != "" {
		return &vc, fail(name, "%s", detail), nil
	}
	return &vc, Check{Name: name, Result: Pass, Detail: string(alg) + " kid " + kid + ", iss " + vc.Iss}, nil
}

// verifiedClaims sets *dst to the claims of the verified payload. When the
// payload is byte for byte the one decoded before the check (unverified
// holds its claims), those claims are taken instead of decoding it again.
func verifiedClaims[T any](payload, decoded []byte, unverified, dst *T) error {
	if bytes.Equal(payload, decoded) {
		*dst = *unverified
		return nil
	}
	return json.Unmarshal(payload, dst)
}

// claimsProblem says why verified claims did not decode: a claim of the
// wrong JSON type (such as a string iat) is named.
func claimsProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("claim %s is a JSON %s, not a %s", te.Field, te.Value, te.Type)
	}
	return "claims are not a JSON object"
}

// times checks the JWT times present against the supported range and
// returns them; the problem quotes a raw value that is out of range.
func times(iat, exp, nbf *NumericDate) (ti, te, tn time.Time, problem string) {
	for _, c := range []struct {
		name string
		d    *NumericDate
		dst  *time.Time
	}{{"iat", iat, &ti}, {"exp", exp, &te}, {"nbf", nbf, &tn}} {
		if c.d == nil {
			continue
		}
		t, err := c.d.Check(c.name)
		if err != nil {
			return ti, te, tn, err.Error()
		}
		*c.dst = t
	}
	return ti, te, tn, ""
}

// requestClaimProblem applies the claim rules of PACT §3.2 as of at, the
// time of use.
func (v *Verifier) requestClaimProblem(c RequestClaims, at time.Time, use tokenUse) string {
	skew := v.cfg.Skew
	if c.Sub == "" {
		return "sub missing"
	}
	aud, ok := audience(c.Aud, false)
	if !ok || len(aud) != 1 || aud[0] != v.cfg.Audience {
		return audienceRequired + strconv.Quote(v.cfg.Audience)
	}
	if c.Iat == nil {
		return "iat missing"
	}
	if c.Exp == nil {
		return "exp missing"
	}
	iat, exp, nbf, problem := times(c.Iat, c.Exp, c.Nbf)
	if problem != "" {
		return problem
	}
	if !nbf.IsZero() && nbf.After(at.Add(skew)) {
		return fmt.Sprintf("not valid before %s, after %s %s", nbf.Format(time.RFC3339), use.at, at.Format(time.RFC3339))
	}
	if exp.Sub(iat) > 300*time.Second {
		return fmt.Sprintf("exp is %s after iat (at most 300s)", exp.Sub(iat))
	}
	if iat.After(at.Add(skew)) {
		return fmt.Sprintf("iat %s is more than %s after %s %s", iat.Format(time.RFC3339), skew, use.at, at.Format(time.RFC3339))
	}
	if at.After(exp.Add(skew)) {
		return fmt.Sprintf("expired at %s, before %s %s", exp.Format(time.RFC3339), use.at, at.Format(time.RFC3339))
	}
	return ""
}

// checkToken checks the delegation token against the keys brand gives, as
// of a receipt's ts at; it returns the signer whose keys it was checked
// against.
func (v *Verifier) checkToken(t Token, at time.Time, brand func(refresh bool) (Signer, error)) (*TokenClaims, Check, Signer, error) {
	return v.checkTokenFor(t, at, forReceipt, brand)
}

// issuerMismatch joins, in a failed delegation_token check's detail, the
// token's iss and the issuer it was held to, each quoted.
const issuerMismatch = " is not the brand's authorization server "

// maxIssShown bounds the token's iss quoted in an issuer mismatch's
// detail: the issuer it was held to, quoted after it, then stays within
// the detail an answer carries (2 KiB) whatever iss the token carries.
const maxIssShown = 256

// shownIss is a token's iss as an issuer mismatch's detail quotes it:
// whole up to maxIssShown bytes, else its first ones, cut between
// characters, and how many bytes were left out.
func shownIss(iss string) string {
	if len(iss) <= maxIssShown {
		return strconv.Quote(iss)
	}
	n := maxIssShown
	for n > 0 && !utf8.RuneStart(iss[n]) {
		n--
	}
	return strconv.Quote(iss[:n]) + "… (" + strconv.Itoa(len(iss)-n) + " bytes more)"
}

// IssuerHeldTo is the issuer a delegation_token check's detail says the
// token was held to, when the check failed on its iss: a row's record
// keeps the key set its token was checked against, not the issuer, which
// only such a failure depends on (a token that passed, or failed on
// another claim, carried the issuer it was held to).
func IssuerHeldTo(detail string) (string, bool) {
	i := strings.LastIndex(detail, issuerMismatch)
	if i < 0 || !strings.HasPrefix(detail, `iss "`) {
		return "", false
	}
	iss, err := strconv.Unquote(detail[i+len(issuerMismatch):])
	if err != nil {
		return "", false
	}
	return iss, true
}

// audienceRequired begins a failed request_signature check's detail
// when the JWT's aud is not the audience it was held to, which follows
// it quoted.
const audienceRequired = "aud must be the single string "

// AudienceHeldTo is the audience a request JWT was held to, read from
// the detail of its failed request_signature check; false when the
// detail does not name one (the check passed, or failed on something
// else).
func AudienceHeldTo(detail string) (string, bool) {
	rest, ok := strings.CutPrefix(detail, audienceRequired)
	if !ok {
		return "", false
	}
	aud, err := strconv.Unquote(rest)
	if err != nil {
		return "", false
	}
	return aud, true
}

// ReadRequestClaims is a request JWT's claims read before its signature
// is checked, as the verifier reads them to ask for the agent's keys;
// false when the JWT does not decode.
func ReadRequestClaims(jwt string) (RequestClaims, bool) {
	var claims RequestClaims
	c, err := ParseToken(jwt).Compact()
	if err != nil || json.Unmarshal(c.Payload, &claims) != nil {
		return RequestClaims{}, false
	}
	return claims, true
}

// Audience is the single string c's aud names; false when aud is not
// one string (PACT §3.1).
func (c RequestClaims) Audience() (string, bool) {
	aud, ok := audience(c.Aud, false)
	if !ok || len(aud) != 1 {
		return "", false
	}
	return aud[0], true
}

// WithAudience is v holding request JWTs to aud instead of its
// configured audience, for re-running a row's checks as of the audience
// it was held to; everything else, its cache included, is v's.
func (v *Verifier) WithAudience(aud string) *Verifier {
	c := *v
	c.cfg.Audience = aud
	return &c
}

// tokenUse says what a delegation token is checked for: the receipt it
// came with, which it must cover (an expired token fails), or a refused
// request, whose token may have ended (that is why it was refused).
type tokenUse struct {
	at    string // what the time checked as of is, in a detail
	ended bool   // an expired token passes, its expiry told
}

var (
	forReceipt = tokenUse{at: "the receipt ts"}
	forRefusal = tokenUse{at: "the refusal's observedAt", ended: true}
)

// checkTokenFor is checkToken for use.
func (v *Verifier) checkTokenFor(t Token, at time.Time, use tokenUse, brand func(refresh bool) (Signer, error)) (*TokenClaims, Check, Signer, error) {
	const name = CheckDelegationToken
	// Delegation tokens go through the cache when there is one. Receipts
	// and request JWTs are checked directly: each is recorded once (a
	// request JWT posted again is a duplicate row), so caching them would
	// only evict the tokens that are sent again.
	tc := newTokenCheck(v.cache, t.Raw())
	var claims TokenClaims
	var decoded []byte
	if tc.cached != nil {
		// The same bytes decoded before; they decode to the same claims.
		claims = tc.cached.claims
	} else {
		c, bad := unverifiedClaims(name, "delegation token", t, &claims)
		if bad != nil {
			return nil, *bad, Signer{}, nil
		}
		decoded = c.Payload
	}
	payload, kid, alg, s, err := verifySigned(t.Raw(), tc.check, brand)
	if u := decided(err); u != nil {
		return nil, Check{}, s, u
	}
	if err != nil {
		return &claims, fail(name, "%v", err), s, nil
	}
	var vc TokenClaims
	if tc.hit != nil {
		vc = tc.hit.claims
	} else {
		if err := verifiedClaims(payload, decoded, &claims, &vc); err != nil {
			return &claims, fail(name, "%s", claimsProblem(err)), s, nil
		}
		tc.keep(vc)
	}
	skew := v.cfg.Skew
	iat, exp, nbf, problem := times(vc.Iat, vc.Exp, vc.Nbf)
	expired := at.After(exp.Add(skew))
	switch {
	case s.Issuer != "" && vc.Iss != s.Issuer:
		return &vc, fail(name, "iss %s"+issuerMismatch+"%q", shownIss(vc.Iss), s.Issuer), s, nil
	case vc.Exp == nil:
		return &vc, fail(name, "exp missing"), s, nil
	case problem != "":
		return &vc, fail(name, "%s", problem), s, nil
	case expired && !use.ended:
		return &vc, fail(name, "expired at %s, before %s %s", exp.Format(time.RFC3339), use.at, at.Format(time.RFC3339)), s, nil
	case vc.Iat != nil && iat.After(at.Add(skew)):
		return &vc, fail(name, "issued at %s, after %s %s", iat.Format(time.RFC3339), use.at, at.Format(time.RFC3339)), s, nil
	case vc.Nbf != nil && nbf.After(at.Add(skew)):
		return &vc, fail(name, "not valid before %s, after %s %s", nbf.Format(time.RFC3339), use.at, at.Format(time.RFC3339)), s, nil
	}
	detail := string(alg) + " kid " + kid + ", expires " + exp.Format(time.RFC3339)
	if expired {
		detail = string(alg) + " kid " + kid + ", expired at " + exp.Format(time.RFC3339) + ", before " + use.at + " " + at.Format(time.RFC3339)
	}
	return &vc, Check{Name: name, Result: Pass, Detail: detail}, s, nil
}

// checkBindings: grant id, user, pa and brand agree across receipt, token
// and request JWT.
func checkBindings(rc Receipt, req *RequestClaims, tok *TokenClaims) Check {
	const name = CheckBindings
	var problems []string
	if rc.GrantID == "" || rc.User == "" || rc.PA == "" || rc.Brand == "" {
		problems = append(problems, "receipt lacks grantId, user, pa or brand")
	}
	if tok == nil {
		problems = append(problems, "no delegation token claims")
	} else {
		aud, ok := audience(tok.Aud, true)
		if !ok || len(aud) != 1 || aud[0] != rc.Brand {
			problems = append(problems, fmt.Sprintf("token aud is not the receipt brand %q", rc.Brand))
		}
		if tok.ClientID != rc.PA {
			problems = append(problems, fmt.Sprintf("token client_id %q != receipt pa %q", tok.ClientID, rc.PA))
		}
		if tok.Sub != rc.User {
			problems = append(problems, fmt.Sprintf("token sub %q != receipt user %q", tok.Sub, rc.User))
		}
		if tok.GrantID != rc.GrantID {
			problems = append(problems, fmt.Sprintf("token grant_id %q != receipt grantId %q", tok.GrantID, rc.GrantID))
		}
	}
	if req == nil {
		problems = append(problems, "no request JWT claims")
	} else if req.Iss != rc.PA {
		problems = append(problems, fmt.Sprintf("request JWT iss %q != receipt pa %q", req.Iss, rc.PA))
	}
	if len(problems) > 0 {
		return Check{Name: name, Result: Fail, Detail: strings.Join(problems, "; ")}
	}
	return Check{Name: name, Result: Pass, Detail: "grant, user, pa and brand agree"}
}

// maxScopesBytes bounds each list of scopes quoted in the
// scopes_within_grant detail; the row keeps the scopes themselves.
const maxScopesBytes = 1024

func checkScopes(rc Receipt, tok *TokenClaims) Check {
	const name = CheckScopesWithin
	if tok == nil {
		return fail(name, "no delegation token scope to compare with")
	}
	// Past a few scopes granted, a set rather than a search of the list
	// for each scope used: the claims are compared before anything says
	// their signatures verify, and a forged receipt and token of
	// thousands of one-letter scopes each would otherwise cost millions
	// of comparisons.
	granted := tok.Scopes()
	within := func(s string) bool { return slices.Contains(granted, s) }
	if len(granted) > 16 {
		set := make(map[string]struct{}, len(granted))
		for _, s := range granted {
			set[s] = struct{}{}
		}
		within = func(s string) bool { _, ok := set[s]; return ok }
	}
	var beyond []string
	for _, s := range rc.ScopesUsed {
		if !within(s) {
			beyond = append(beyond, s)
		}
	}
	if len(beyond) > 0 {
		return fail(name, "scopes used beyond the grant: %s (granted: %s)", truncate(strings.Join(beyond, " "), maxScopesBytes), truncate(tok.Scope, maxScopesBytes))
	}
	return Check{Name: name, Result: Pass, Detail: "used [" + truncate(strings.Join(rc.ScopesUsed, " "), maxScopesBytes) + "] within [" + truncate(tok.Scope, maxScopesBytes) + "]"}
}

// ArgsHash is base64url (no padding) of the SHA-256 of the exact args JSON.
func ArgsHash(argsJSON string) string {
	sum := sha256.Sum256([]byte(argsJSON))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// checkArgs pairs each receipt action with the first unused logged action of
// the same tool and compares args hashes. An action with a target records
// whether the signed args name it (TargetSource).
func checkArgs(signed []ReceiptAction, logged []Action) ([]RowAction, Check) {
	const name = CheckArgsHash
	pairs, used := pairActions(signed, logged)
	var out []RowAction
	var problems []string
	computed, matched := 0, 0
	for i, ra := range signed {
		row := RowAction{Tool: ra.Tool}
		// signedArgs is the logged args when they are the ones the
		// receipt signed (their hash is its args hash).
		var signedArgs string
		var log *Action
		if pairs[i] >= 0 {
			log = &logged[pairs[i]]
		}
		if log != nil {
			row.Target = log.Target
		}
		switch {
		case ra.ArgsHash != "" && (log == nil || log.ArgsJSON == ""):
			row.ArgsHash, row.HashSource = ra.ArgsHash, HashFromReceipt
			problems = append(problems, fmt.Sprintf("%s: the receipt signs an args hash but no logged args were posted", ra.Tool))
		case ra.ArgsHash != "":
			row.ArgsHash, row.HashSource = ra.ArgsHash, HashFromReceipt
			if got := ArgsHash(log.ArgsJSON); got != ra.ArgsHash {
				problems = append(problems, fmt.Sprintf("%s: logged args hash %s != receipt argsHash %s", ra.Tool, got, ra.ArgsHash))
			} else {
				matched++
				signedArgs = log.ArgsJSON
			}
		case log != nil && log.ArgsJSON != "":
			row.ArgsHash, row.HashSource = ArgsHash(log.ArgsJSON), HashComputedByLedger
			computed++
		}
		if row.Target != "" {
			// The target is the action log's; the signed args vouch for it
			// only when they name it (docs/design/012).
			row.TargetSource = TargetFromWriter
			if signedArgs != "" && NamesTarget(signedArgs, row.Target) {
				row.TargetSource = TargetFromSignedArgs
			}
		}
		out = append(out, row)
	}
	for j, l := range logged {
		if !used[j] {
			problems = append(problems, fmt.Sprintf("logged action %s %s is not in the receipt", l.Tool, l.Target))
		}
	}
	if len(problems) > 0 {
		return out, Check{Name: name, Result: Fail, Detail: listProblems(problems)}
	}
	return out, Check{Name: name, Result: Pass, Detail: strconv.Itoa(matched) + " matched the receipt, " + strconv.Itoa(computed) + " computed by the ledger"}
}

// pairActions pairs each receipt action with the first unused logged
// action of the same tool: pairs[i] is the index in logged of receipt
// action i's, or -1; used[j] says logged action j is paired.
func pairActions(signed []ReceiptAction, logged []Action) (pairs []int, used []bool) {
	pairs, used = make([]int, len(signed)), make([]bool, len(logged))
	for i, ra := range signed {
		pairs[i] = -1
		for j := range logged {
			if !used[j] && logged[j].Tool == ra.Tool {
				used[j], pairs[i] = true, j
				break
			}
		}
	}
	return pairs, used
}

// SignedArgs is, for each of the receipt's actions, the logged args
// paired with it as Verify pairs them when they are the args the receipt
// signs (their hash is its argsHash), else "": the args whose word the
// action's TargetSource reads.
func SignedArgs(signed []ReceiptAction, logged []Action) []string {
	out := make([]string, len(signed))
	pairs, _ := pairActions(signed, logged)
	for i, j := range pairs {
		if j >= 0 && signed[i].ArgsHash != "" && logged[j].ArgsJSON != "" && ArgsHash(logged[j].ArgsJSON) == signed[i].ArgsHash {
			out[i] = logged[j].ArgsJSON
		}
	}
	return out
}

// maxProblemsListed and maxProblemBytes bound a check's detail, which is
// kept with the row: the problems a writer's input can multiply (one per
// logged action, each naming a tool and target of up to 512 bytes) are
// listed up to this many, each cut to this many bytes.
const (
	maxProblemsListed = 8
	maxProblemBytes   = 160
)

// listProblems joins problems for a check's detail, within the bounds.
func listProblems(problems []string) string {
	var b strings.Builder
	for i, p := range problems {
		if i == maxProblemsListed {
			fmt.Fprintf(&b, "; and %d more", len(problems)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(truncate(p, maxProblemBytes))
	}
	return b.String()
}

// ErrPAJWT: a personal-agent JWT failed PACT §3.2; the wrapped text says why.
var ErrPAJWT = errors.New("personal-agent JWT rejected")

// VerifyPAJWT checks a personal-agent JWT as a Provider does on each request
// (PACT §3.2): registered enabled issuer, signature against its JWKS with
// the algorithm allow-list, sub, the assigned audience, iat and exp rules,
// all as of at with the configured skew. It returns the verified claims.
func (v *Verifier) VerifyPAJWT(ctx context.Context, token string, at time.Time, src KeySource) (*RequestClaims, error) {
	res := &Result{}
	claims, c, err := v.checkRequest(ctx, ParseToken(token), at, forReceipt, src.Agent, res)
	if err != nil {
		return nil, err
	}
	if c.Result != Pass {
		return nil, fmt.Errorf("%w: %s", ErrPAJWT, c.Detail)
	}
	return claims, nil
}
