package pacttest

import (
	"crypto/rand"

	"golang.org/x/mod/sumdb/note"
)

// LogKey makes a new Merkle-log checkpoint key for origin: its signer and
// its verifier key.
func LogKey(origin string) (note.Signer, string, error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return nil, "", err
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, "", err
	}
	return s, vkey, nil
}
