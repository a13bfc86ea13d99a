package provider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/go-jose/go-jose/v4"
)

// signingKey is the Provider's ES256 key for delegation tokens (and, with
// the Delegated profile, receipts), kept in a file readable only by its
// owner and published in each delegating brand's JWKS.
type signingKey struct {
	jwk      jose.JSONWebKey
	signer   jose.Signer // delegation tokens: typ at+jwt
	receipts jose.Signer // receipts: typ JWT
	jwks     []byte
}

// loadSigningKey reads the key at path, creating it on first use.
func loadSigningKey(path string) (*signingKey, error) {
	b, err := os.ReadFile(path)
	var k jose.JSONWebKey
	switch {
	case errors.Is(err, fs.ErrNotExist):
		priv, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if gerr != nil {
			return nil, gerr
		}
		id := make([]byte, 6)
		_, _ = rand.Read(id)
		k = jose.JSONWebKey{Key: priv, KeyID: "provider-" + hex.EncodeToString(id), Algorithm: string(jose.ES256), Use: "sig"}
		out, merr := k.MarshalJSON()
		if merr != nil {
			return nil, merr
		}
		f, oerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if oerr != nil {
			return nil, fmt.Errorf("create signing key %s: %w", path, oerr)
		}
		_, werr := f.Write(out)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, werr
		}
	case err != nil:
		return nil, fmt.Errorf("read signing key %s: %w", path, err)
	default:
		if err := k.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("signing key %s: %w", path, err)
		}
	}
	if _, ok := k.Key.(*ecdsa.PrivateKey); !ok {
		return nil, fmt.Errorf("signing key %s is not an EC private key", path)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	receipts, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.Public()}})
	if err != nil {
		return nil, err
	}
	return &signingKey{jwk: k, signer: signer, receipts: receipts, jwks: jwks}, nil
}

// signReceipt returns the compact JWS of receipt claims (PACT §5.6), signed
// with the same key as the delegation tokens.
func (k *signingKey) signReceipt(claims any) (string, error) { return compact(k.receipts, claims) }

// sign returns the compact JWS of delegation token claims.
func (k *signingKey) sign(claims any) (string, error) { return compact(k.signer, claims) }

// compact signs the JSON of claims and returns the compact JWS.
func compact(s jose.Signer, claims any) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
