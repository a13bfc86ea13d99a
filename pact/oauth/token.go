package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// DelegationClaims are the claims of a delegation token (PACT §5.4).
type DelegationClaims struct {
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Sub      string `json:"sub"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	GrantID  string `json:"grant_id"`
	Iat      int64  `json:"iat"`
	Exp      int64  `json:"exp"`
	Jti      string `json:"jti"`
}

// VerifyDelegation checks a delegation token as PACT §5.5 says: signature
// with the Provider's key (ES256 only), iss the brand's authorization
// server, aud the interface URL, not expired (30 s skew) and client_id the
// personal agent's iss. Whether its grant is still active is the caller's
// to check.
func VerifyDelegation(token string, key any, issuer, audience, client string, now time.Time) (*DelegationClaims, error) {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, err
	}
	var c DelegationClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	switch {
	case c.Iss != issuer:
		return nil, fmt.Errorf("iss %q is not this brand's authorization server", c.Iss)
	case c.Aud != audience:
		return nil, fmt.Errorf("aud %q is not this brand's interface", c.Aud)
	case now.After(time.Unix(c.Exp, 0).Add(30 * time.Second)):
		return nil, errors.New("expired")
	case c.ClientID != client:
		return nil, errors.New("client_id is not the personal agent's iss")
	}
	return &c, nil
}
