package verifier

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RefusalToken is the verifier's view of the delegation token a refused
// request carried (PACT §5.4, §5.5), and of the request's personal-agent
// JWT beside it: what ties a refusal to a grant.
type RefusalToken struct {
	// Claims are the token's claims, verified when Vouches; nil when the
	// token does not decode.
	Claims *TokenClaims
	// Brand is the interface URL the token's aud names, whose keys it
	// was checked against; "" when aud names no one brand.
	Brand string
	// Kid is the kid the token's header names.
	Kid string
	// BrandSnapshot is the brand's key set the token was checked against,
	// when its keys were fetched.
	BrandSnapshot *Snapshot
	// AgentIssuer, RequestKid and AgentSnapshot are the request JWT's iss,
	// kid and the agent's key set it was checked against, as Result has
	// them.
	AgentIssuer   string
	RequestKid    string
	AgentSnapshot *Snapshot
	// Request, Token and Bindings are the request_signature,
	// delegation_token and bindings checks.
	Request, Token, Bindings Check
}

// Vouches reports whether the token ties the refusal to its grant: its
// signature and claims passed (delegation_token) and it does not name
// another agent than the request JWT (bindings did not fail).
func (t *RefusalToken) Vouches() bool {
	return t.Claims != nil && t.Token.Result == Pass && t.Bindings.Result != Fail
}

// VerifyRefusalToken checks the delegation token a refused request
// carried as a receipt's delegation token is checked, as of the refusal's
// observedAt at: the signature against the keys of the brand its aud
// names (the key source's: a brand it does not trust fails), the brand's
// authorization server as iss, exp present, iat and nbf not after at, and
// sub, client_id and grant_id present. A token that expired before at
// still passes, its expiry told in the detail: a refusal of an ended
// grant's token is what the record is for. The request's JWT, when
// posted, is checked as a receipt's (PACT §3.2) as of at, and bindings
// compares the token's client_id with its iss once it verified; without
// one, or with one that did not verify, bindings is SKIPPED. It returns an error wrapping ErrUndecided, and no result, when
// the brand's or the agent's keys could not be fetched.
func (v *Verifier) VerifyRefusalToken(ctx context.Context, tok, request Token, at time.Time, src KeySource) (*RefusalToken, error) {
	res := &RefusalToken{
		Request:  skipped(CheckRequestSignature, "no request JWT was posted"),
		Bindings: skipped(CheckBindings, "the delegation token was not checked"),
	}
	// The token is checked before the request JWT, whose agent the
	// token's brand may have granted on its own policy
	// (GrantedAgentSource).
	check, checked, err := v.refusalTokenCheck(ctx, tok, at, src, res)
	if err != nil {
		return nil, err
	}
	var req *RequestClaims
	if request.Raw() != "" {
		r := &Result{}
		agent := grantedTo(src, res.Brand, res.Claims, check.Result == Pass)
		if req, res.Request, err = v.checkRequest(ctx, request, at, forRefusal, agent, r); err != nil {
			return nil, err
		}
		res.AgentIssuer, res.RequestKid, res.AgentSnapshot = r.AgentIssuer, r.RequestKid, r.AgentSnapshot
	}
	if !checked {
		return res, nil
	}
	vc := res.Claims
	switch {
	case check.Result != Pass:
		res.Bindings = skipped(CheckBindings, "the delegation token did not verify")
	case req == nil && request.Raw() == "":
		res.Bindings = skipped(CheckBindings, "no request JWT was posted: the token's client_id %q is the agent the grant was made to", truncate(vc.ClientID, maxProblemBytes))
	case req == nil:
		res.Bindings = fail(CheckBindings, "the request JWT does not decode: no agent to bind the token's client_id %q to", truncate(vc.ClientID, maxProblemBytes))
	case res.Request.Result != Pass:
		// Its claims are no agent's word: nothing to bind the token to.
		res.Bindings = skipped(CheckBindings, "the request JWT did not verify: no agent's signature to bind the token's client_id %q to", truncate(vc.ClientID, maxProblemBytes))
	case req.Iss != vc.ClientID:
		res.Bindings = fail(CheckBindings, "token client_id %q != request JWT iss %q", truncate(vc.ClientID, maxProblemBytes), truncate(req.Iss, maxProblemBytes))
	default:
		res.Bindings = Check{Name: CheckBindings, Result: Pass, Detail: "the token's client_id is the request JWT's iss"}
	}
	return res, nil
}

// refusalTokenCheck checks a refused request's delegation token as
// VerifyRefusalToken documents, and sets res's Token, Kid, Brand,
// BrandSnapshot and Claims. checked is false when the token was not
// checked against a brand's keys: it does not decode, or its aud names no
// one brand. The error wraps ErrUndecided when the brand's keys could not
// be fetched.
func (v *Verifier) refusalTokenCheck(ctx context.Context, tok Token, at time.Time, src KeySource, res *RefusalToken) (check Check, checked bool, err error) {
	var claims TokenClaims
	c, bad := unverifiedClaims(CheckDelegationToken, "delegation token", tok, &claims)
	if bad != nil {
		res.Token = *bad
		return *bad, false, nil
	}
	res.Kid = c.Kid
	aud, ok := claims.Audience()
	if !ok {
		res.Claims = &claims
		res.Token = fail(CheckDelegationToken, "aud does not name one brand: no keys to check the token against")
		return res.Token, false, nil
	}
	res.Brand = aud
	vc, check, s, err := v.checkTokenFor(tok, at, forRefusal, func(refresh bool) (Signer, error) { return src.Brand(ctx, aud, refresh) })
	if err != nil {
		return Check{}, false, err
	}
	if s.Keys != nil {
		snap := s.Keys.Snapshot
		res.BrandSnapshot = &snap
	}
	res.Claims = vc
	if check.Result == Pass {
		var missing []string
		for _, f := range []struct{ name, v string }{{"sub", vc.Sub}, {"client_id", vc.ClientID}, {"grant_id", vc.GrantID}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			check = fail(CheckDelegationToken, "%s missing", strings.Join(missing, ", "))
		}
	}
	res.Token = check
	return check, true, nil
}

func skipped(name, format string, args ...any) Check {
	return Check{Name: name, Result: Skipped, Detail: fmt.Sprintf(format, args...)}
}
