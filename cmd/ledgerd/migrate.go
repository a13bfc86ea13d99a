package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/storage/postgres"
)

// migrateUsage heads `ledgerd migrate --help`.
const migrateUsage = `usage: ledgerd migrate [--config FILE]
       ledgerd migrate --from bbolt:PATH [--to postgres:DSN | --config FILE]

Create or upgrade the PostgreSQL store's schema; with --from, copy the
ledger in a bbolt file into the PostgreSQL store (resumable).

flags:
`

// migrate runs `ledgerd migrate [--config FILE]`: it brings the
// PostgreSQL row store's schema to the version this ledgerd writes and
// prints the version.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledgerd migrate", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "read the YAML configuration in `FILE`, whose store block names the database")
	moveFrom := fs.String("from", "", "bbolt:PATH: also copy the ledger kept in this bbolt file into the database (resumable)")
	moveTo := fs.String("to", "", "postgres:DSN: the database to copy into, instead of the configuration's store")
	if err := parseFlags(fs, args, migrateUsage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (usage: ledgerd migrate [--config FILE] [--from bbolt:PATH [--to postgres:DSN]])", fs.Arg(0))
	}
	if *moveFrom != "" || *moveTo != "" {
		return moveLedger(ctx, *cfgPath, *moveFrom, *moveTo, stdout)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if cfg.Store.Kind != config.StorePostgres {
		return errors.New("store.kind is bbolt, which needs no migration: migrate applies to a postgres store")
	}
	pc, err := server.PostgresConfig(cfg.Store)
	if err != nil {
		return err
	}
	from, to, err := postgres.Migrate(ctx, pc)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if from == to {
		_, err = fmt.Fprintf(stdout, "the database schema is at version %d, the newest this ledgerd knows: nothing to do\n", to)
		return err
	}
	_, err = fmt.Fprintf(stdout, "migrated the database schema from version %d to version %d\n", from, to)
	return err
}
