package verifier_test

import (
	"strconv"
	"testing"

	"github.com/pactledger/pactledger/verifier"
)

// IssuerHeldTo reads the issuer back from a failed check's detail, the
// token's own iss quoted before it whatever it holds.
func TestIssuerHeldToReadsTheIssuerBack(t *testing.T) {
	const held = "https://brand.example/oauth"
	for _, iss := range []string{"https://elsewhere.example", `x" is not the brand's authorization server "y`, " is not the brand's authorization server ", ""} {
		detail := "iss " + strconv.Quote(iss) + " is not the brand's authorization server " + strconv.Quote(held)
		if got, ok := verifier.IssuerHeldTo(detail); !ok || got != held {
			t.Errorf("token iss %q: IssuerHeldTo = %q, %v; want %q", iss, got, ok, held)
		}
	}
	for _, detail := range []string{"exp missing", "ES256 kid k1, expires 2026-10-07T14:07:44Z", `iss "a" is not the brand's authorization server "b`} {
		if got, ok := verifier.IssuerHeldTo(detail); ok {
			t.Errorf("detail %q: IssuerHeldTo = %q; want none", detail, got)
		}
	}
}
