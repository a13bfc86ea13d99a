package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// moveLedger runs `ledgerd migrate --from bbolt:PATH [--to postgres:DSN]`:
// it copies the ledger in the bbolt file into the PostgreSQL database
// (the configuration's store unless --to names one), continuing a move an
// earlier run began, and verifies the copy. With --to the password comes
// from the DSN's sources (PGPASSWORD, ~/.pgpass); with the configuration,
// from store.passwordFile or store.passwordEnv.
func moveLedger(ctx context.Context, cfgPath, from, to string, stdout io.Writer) error {
	path, ok := strings.CutPrefix(from, "bbolt:")
	if !ok || path == "" {
		return errors.New("--from takes bbolt:PATH, the bbolt file to move (store.path, by default <dataDir>/ledger.db)")
	}
	target, err := moveTarget(cfgPath, to)
	if err != nil {
		return err
	}
	rep, err := move.Run(ctx, move.Config{From: path, To: target, Progress: stdout})
	if err != nil {
		return fmt.Errorf("migrate --from %s: %w", from, err)
	}
	if rep.AlreadyMoved && rep.MarkedFile {
		_, err = fmt.Fprintf(stdout, "the move had verified, and verified again in %s; the bbolt file lacked the mark that it was moved, and has it now\n", rep.Took.Round(1e6))
		return err
	}
	if rep.AlreadyMoved {
		_, err = fmt.Fprintf(stdout, "nothing to do: the move was already complete, and verified again in %s\n", rep.Took.Round(1e6))
		return err
	}
	_, err = fmt.Fprintf(stdout, "done in %s: %d records copied by this run\n", rep.Took.Round(1e6), rep.Copied)
	return err
}

// moveTarget is the database a move copies into: --to's DSN, else the
// configuration's postgres store.
func moveTarget(cfgPath, to string) (postgres.Config, error) {
	if to != "" {
		dsn, ok := strings.CutPrefix(to, "postgres:")
		if !ok || dsn == "" {
			return postgres.Config{}, errors.New("--to takes postgres:DSN")
		}
		return postgres.Config{DSN: dsn}, nil
	}
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return postgres.Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return postgres.Config{}, fmt.Errorf("config: %w", err)
	}
	if cfg.Store.Kind != config.StorePostgres {
		return postgres.Config{}, errors.New("no database to move into: give --to postgres:DSN, or --config with store.kind postgres")
	}
	return server.PostgresConfig(cfg.Store)
}
