package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/pact"
)

// RotateProviderKey is `ledgerd provider rotate-key`, with ledgerd
// stopped: the embedded Provider's new signing key becomes current, and
// the one it replaces stays published for provider.retiredKeyTTL, so that
// the receipts waiting in the Provider's outbox, the delegation tokens it
// issued and the receipts agents kept still verify meanwhile. With
// replaceLost it makes a new key where the key file is missing (a key lost
// for good). It logs what it did.
func RotateProviderKey(ctx context.Context, cfg config.Config, replaceLost bool, log *slog.Logger) (pact.Rotation, error) {
	if err := cfg.Validate(); err != nil {
		return pact.Rotation{}, fmt.Errorf("config: %w", err)
	}
	if !cfg.Provider.On() {
		return pact.Rotation{}, errors.New("provider.enabled is false: this ledgerd runs no Provider, and keeps no signing key")
	}
	rot, err := pact.RotateSigningKey(pact.RotateConfig{StorePath: providerStorePath(cfg), RetiredKeyTTL: time.Duration(cfg.Provider.RetiredKeyTTL),
		ReplaceLost: replaceLost, Logger: log})
	if errors.Is(err, pact.ErrStoreLocked) {
		return rot, fmt.Errorf("%w: stop ledgerd first (a running Provider reads its signing key only when it starts)", err)
	}
	return rot, err
}

// providerStorePath is the embedded Provider's bbolt file.
func providerStorePath(cfg config.Config) string { return filepath.Join(cfg.DataDir, "provider.db") }
