package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/pact"
)

// providerUsage heads `ledgerd provider --help`.
const providerUsage = `usage: ledgerd provider rotate-key [--config FILE] [--data-dir DIR] [--replace-lost]

With ledgerd stopped: make a new signing key current for the embedded
Provider. The key it replaces signs no more and stays published in every
delegating brand's JWKS for provider.retiredKeyTTL (default 168h), so that
the receipts and delegation tokens it signed still verify meanwhile; then
it drops out. Start ledgerd again to sign with the new key.

--replace-lost makes a new key where the key file is missing, for a key
lost for good: what the lost key signed no longer verifies.

flags:
`

// provider runs `ledgerd provider rotate-key`.
func provider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, providerUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "rotate-key" {
		return errors.New("usage: ledgerd provider rotate-key [--config FILE] [--data-dir DIR] [--replace-lost]")
	}
	fs := flag.NewFlagSet("ledgerd provider rotate-key", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "read the YAML configuration in `FILE` (the one ledgerd runs with)")
	dataDir := fs.String("data-dir", "", "the data directory is `DIR` (default ./data)")
	replaceLost := fs.Bool("replace-lost", false, "make a new key where the key file is missing (a key lost for good)")
	if err := parseFlags(fs, args[1:], providerUsage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (usage: ledgerd provider rotate-key [--config FILE] [--data-dir DIR] [--replace-lost])", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	level, err := cfg.Log.SlogLevel()
	if err != nil {
		return err
	}
	rot, err := server.RotateProviderKey(ctx, cfg, *replaceLost, jsonLog(stderr, level))
	if errors.Is(err, pact.ErrNoStore) {
		dir, _ := filepath.Abs(cfg.DataDir)
		return fmt.Errorf("%w: it looked in the data directory %s; run it with the configuration ledgerd runs with (--config FILE), or name its data directory (--data-dir DIR)", err, dir)
	}
	if err != nil {
		return err
	}
	held := fmt.Sprintf("the Provider's store holds %d grants, %d entries waiting for the ledger and %d set aside", rot.Grants, rot.Waiting, rot.SetAside)
	if rot.Retired == "" {
		_, err = fmt.Fprintf(stdout, "new signing key %s made in place of a lost one: the delegation tokens and receipts the lost key signed no longer verify (%s); agents authorize again.\nStart ledgerd to sign with it.\n", rot.Kid, held)
		return err
	}
	if _, err = fmt.Fprintf(stdout, "signing key %s is current; %s is retired and stays published for verification until %s.\n%s.\nStart ledgerd to sign with the new key.\n",
		rot.Kid, rot.Retired, rot.PublishedUntil.Format(time.RFC3339), held); err != nil {
		return err
	}
	for _, kid := range rot.Dropped {
		if _, err = fmt.Fprintf(stdout, "retired key %s is past its period: it left the key file and is no longer published.\n", kid); err != nil {
			return err
		}
	}
	return nil
}
