package oauth

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/pactledger/pactledger/pact/brand"
)

// NewSecret is a random 256-bit token, base64url, after prefix: device
// codes, refresh tokens, tickets, cookies.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// userCodeAlphabet has no vowels or look-alike characters (RFC 8628 §6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// NewUserCode is a user code the User types or checks: eight letters of
// userCodeAlphabet, as XXXX-XXXX.
func NewUserCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	return string(out)
}

// NormalUserCode accepts a user code typed in lower case, with spaces, or
// without its dash.
func NormalUserCode(s string) string {
	s = strings.ToUpper(strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, s))
	if len(s) == 8 {
		s = s[:4] + "-" + s[4:]
	}
	return s
}

// CardScopes checks the scope ids of a request against the Brand's card
// (PACT §5.2, §5.3): at least one, each an id on the card, else
// invalid_scope. It returns them without repeats, in order. The device
// authorization endpoint and the step-up of a turn (§5.5) both check with
// it.
func CardScopes(b *brand.Brand, requested []string) ([]string, *Error) {
	if len(requested) == 0 {
		return nil, NewError(InvalidScope, "ask for at least one of the scopes on the card")
	}
	for _, s := range requested {
		if b.Scope(s) == nil {
			return nil, NewError(InvalidScope, "unknown scope "+s)
		}
	}
	return dedupe(requested), nil
}
