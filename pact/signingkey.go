package pact

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pactledger/pactledger/pact/provider"
	"github.com/pactledger/pactledger/pact/store"
)

// DefaultRetiredKeyTTL is Config.RetiredKeyTTL's default: how long a
// retired signing key stays published.
const DefaultRetiredKeyTTL = provider.DefaultRetiredKeyTTL

// MinRetiredKeyTTL is the shortest retirement period: the life of a
// delegation token.
const MinRetiredKeyTTL = provider.MinRetiredKeyTTL

var (
	// ErrNoSigningKey: the signing key file is missing while the
	// Provider's store holds what it signed (New), or there is no key to
	// retire (RotateSigningKey).
	ErrNoSigningKey = provider.ErrNoSigningKey
	// ErrStoreLocked: another process (a running ledgerd) holds the
	// Provider's store.
	ErrStoreLocked = store.ErrLocked
	// ErrKeyFileMismatch: the signing key file lacks a key that signed
	// entries waiting for the ledger or set aside in the Provider's store,
	// as when it was restored from an older backup than the store (New).
	ErrKeyFileMismatch = provider.ErrKeyFileMismatch
	// ErrNoStore: there is no Provider store at the path given
	// (RotateSigningKey), as when it is looked for in the wrong data
	// directory.
	ErrNoStore = errors.New("no Provider store")
)

// SigningKeyPath is where a Provider whose store is at storePath keeps
// its signing key: provider-signing-key.json beside it.
func SigningKeyPath(storePath string) string {
	return filepath.Join(filepath.Dir(storePath), "provider-signing-key.json")
}

// RotateConfig configures RotateSigningKey.
type RotateConfig struct {
	// StorePath is the Provider's bbolt file: it is held while the key
	// rotates, so that no Provider runs on it meanwhile.
	StorePath string
	// SigningKeyPath is the key file; default SigningKeyPath(StorePath).
	SigningKeyPath string
	// RetiredKeyTTL is the retirement period the Provider runs with;
	// default DefaultRetiredKeyTTL.
	RetiredKeyTTL time.Duration
	// ReplaceLost makes a new key where the key file is missing, for a
	// key lost for good: what it signed verifies no more.
	ReplaceLost bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Rotation is what RotateSigningKey did, and what the Provider's store
// holds that the keys signed.
type Rotation struct {
	// KeyFile is the signing key file, which holds the new key: back it
	// up.
	KeyFile string
	// Kid is the new current key's.
	Kid string
	// Retired is the kid of the key it replaced, published until
	// PublishedUntil; "" when a lost key was replaced.
	Retired        string
	PublishedUntil time.Time
	// Dropped are the retired keys whose period had ended: they left the
	// file and are no longer published.
	Dropped []string
	// Kept are the retired keys whose period had ended but that signed
	// entries still waiting for the ledger or set aside: they stay in the
	// file, and the Provider publishes them until those have reached the
	// ledger.
	Kept []string
	// Lost are the kids of a key replaced as lost (ReplaceLost) that
	// signed entries still waiting for the ledger or set aside: the file
	// names them, so that the Provider starts with those entries, which
	// the ledger records UNAUTHORIZED.
	Lost []string
	// Grants, Waiting and SetAside count the store's grants and its
	// outbox entries waiting for the ledger and set aside.
	Grants, Waiting, SetAside int
}

// RotateSigningKey makes a new signing key current, with the Provider
// stopped: the key it replaces signs no more and stays published, in every
// delegating brand's JWKS, for RetiredKeyTTL, so that the receipts and
// delegation tokens it signed still verify meanwhile. With ReplaceLost it
// makes a new key where none is.
func RotateSigningKey(cfg RotateConfig) (Rotation, error) {
	if cfg.StorePath == "" {
		return Rotation{}, errors.New("pact: the store path is required")
	}
	if cfg.SigningKeyPath == "" {
		cfg.SigningKeyPath = SigningKeyPath(cfg.StorePath)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// Opening it would make an empty store wherever it was looked for.
	if _, err := os.Stat(cfg.StorePath); errors.Is(err, fs.ErrNotExist) {
		return Rotation{}, fmt.Errorf("%w at %s", ErrNoStore, cfg.StorePath)
	}
	st, err := store.Open(cfg.StorePath)
	if err != nil {
		return Rotation{}, err
	}
	defer st.Close()
	n, err := st.Stats()
	if err != nil {
		return Rotation{}, err
	}
	path := cfg.SigningKeyPath
	held := Rotation{KeyFile: path, Grants: n.Grants, Waiting: n.Outbox, SetAside: n.SetAside}
	_, err = os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case err != nil && !missing:
		return Rotation{}, fmt.Errorf("signing key %s: %w", path, err)
	case cfg.ReplaceLost && !missing:
		return Rotation{}, fmt.Errorf("there is a Provider signing key at %s: rotate it without --replace-lost, which is for a key lost for good", path)
	case cfg.ReplaceLost:
		signedBy, err := st.SignedBy()
		if err != nil {
			return Rotation{}, err
		}
		kid, err := provider.ReplaceLostSigningKey(path, signedBy)
		if err != nil {
			return Rotation{}, err
		}
		cfg.Logger.Warn("created the Provider's signing key in place of a lost one: what the lost key signed no longer verifies", slog.String("kid", kid), slog.String("key_file", path),
			slog.Int("grants", n.Grants), slog.Int("waiting_for_the_ledger", n.Outbox), slog.Int("set_aside", n.SetAside), slog.Any("lost_kids", slices.Sorted(maps.Keys(signedBy))))
		held.Kid, held.Lost = kid, slices.Sorted(maps.Keys(signedBy))
		return held, nil
	case missing:
		return Rotation{}, fmt.Errorf("%w at %s to retire: restore it from the backup of provider-signing-key.json and rotate then; if it is lost for good, `ledgerd provider rotate-key --replace-lost` makes a new one, and what the lost key signed no longer verifies", ErrNoSigningKey, path)
	}
	signedBy, err := st.SignedBy()
	if err != nil {
		return Rotation{}, err
	}
	rot, err := provider.RotateSigningKey(path, cfg.RetiredKeyTTL, cfg.Now(), signedBy)
	if err != nil {
		return Rotation{}, err
	}
	cfg.Logger.Info("rotated the Provider's signing key: the new key signs, the retired one stays published for verification", slog.String("kid", rot.Kid),
		slog.String("retired_kid", rot.Retired), slog.Time("published_until", rot.PublishedUntil), slog.String("key_file", path))
	for _, kid := range rot.Dropped {
		cfg.Logger.Info("a retired signing key of the Provider is no longer published", slog.String("kid", kid), slog.String("key_file", path))
	}
	for _, kid := range rot.Kept {
		cfg.Logger.Warn("a retired signing key of the Provider is past its period, but entries it signed wait for the ledger: it stays in the key file, published until they have reached it", slog.String("kid", kid),
			slog.Int("waiting_for_the_ledger", signedBy[kid].Waiting), slog.Int("set_aside", signedBy[kid].SetAside), slog.String("key_file", path))
	}
	held.Kid, held.Retired, held.PublishedUntil, held.Dropped, held.Kept, held.Lost = rot.Kid, rot.Retired, rot.PublishedUntil, rot.Dropped, rot.Kept, rot.Lost
	return held, nil
}
