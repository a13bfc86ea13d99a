package config

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// LogKeyFile is where the checkpoint signing key is kept by default.
func (c *Config) LogKeyFile() string {
	if c.MerkleLog.KeyFile != "" {
		return c.MerkleLog.KeyFile
	}
	return filepath.Join(c.DataDir, "log", "signing.key")
}

// EnsureLogKey returns the Merkle log's checkpoint signer and its verifier
// key, creating the key (file mode 0600, its verifier key beside it as
// verifier.key) on first start; created reports whether it did. A key made
// for another origin is refused, saying what to do: checkpoints of one log
// carry one name. Only a row store that holds no checkpoint yet may be
// given a new key: ledgerd reads the key with ReadLogKey otherwise.
func EnsureLogKey(c *Config) (signer note.Signer, verifierKey string, created bool, err error) {
	path := c.LogKeyFile()
	signer, verifierKey, err = ReadLogKey(c)
	if !errors.Is(err, fs.ErrNotExist) {
		return signer, verifierKey, false, err
	}
	skey, vkey, gerr := note.GenerateKey(rand.Reader, c.MerkleLog.Origin)
	if gerr != nil {
		return nil, "", false, fmt.Errorf("log key: %w", gerr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", false, fmt.Errorf("log key directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
		return nil, "", false, fmt.Errorf("write log key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "verifier.key"), []byte(vkey+"\n"), 0o644); err != nil {
		return nil, "", false, fmt.Errorf("write log verifier key: %w", err)
	}
	signer, verifierKey, err = ReadLogKey(c)
	return signer, verifierKey, err == nil, err
}

// ReadLogKey returns the Merkle log's checkpoint signer and its verifier
// key from merkleLog.keyFile (or its default), never creating one: an
// error wrapping fs.ErrNotExist when the file is not there. A key made for
// another origin is refused as by EnsureLogKey.
func ReadLogKey(c *Config) (signer note.Signer, verifierKey string, err error) {
	path := c.LogKeyFile()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read log key: %w", err)
	}
	skey := strings.TrimSpace(string(b))
	signer, err = note.NewSigner(skey)
	if err != nil {
		return nil, "", fmt.Errorf("log key %s: %w", path, err)
	}
	if signer.Name() != c.MerkleLog.Origin {
		// A log cannot be renamed: its checkpoints, the proofs handed out
		// and the published verifier key carry the name.
		return nil, "", fmt.Errorf("log key %s signs for origin %q, but merkleLog.origin is %q: one log keeps one name, the one its checkpoints, proofs and published verifier key carry; "+
			"set merkleLog.origin back to %q to go on with this log, or, to log under %q, start a new log: a new row store (data directory) and a new bucket or evidence directory, where ledgerd makes a key for that name on its first start (docs/operations.md, \"The Merkle log\")",
			path, signer.Name(), c.MerkleLog.Origin, signer.Name(), c.MerkleLog.Origin)
	}
	verifierKey, err = verifierOf(skey)
	return signer, verifierKey, err
}

// verifierOf derives the verifier key from a note signer key
// ("PRIVATE+KEY+<name>+<hash>+<key>").
func verifierOf(skey string) (string, error) {
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", errors.New("log key: not a note signer key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 { // 1: Ed25519
		return "", errors.New("log key: not an Ed25519 note signer key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	return note.NewEd25519VerifierKey(parts[2], pub)
}
