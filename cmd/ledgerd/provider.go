package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
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

Back up the key file afterwards: it holds the new private key.

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
	var out strings.Builder
	held := fmt.Sprintf("the Provider's store holds %d grants, %d entries waiting for the ledger and %d set aside", rot.Grants, rot.Waiting, rot.SetAside)
	if rot.Retired == "" {
		fmt.Fprintf(&out, "new signing key %s made in place of a lost one: the delegation tokens and receipts the lost key signed no longer verify (%s); agents authorize again.\n", rot.Kid, held)
	} else {
		until := rot.PublishedUntil.Format(time.RFC3339)
		fmt.Fprintf(&out, "signing key %s is current; %s is retired and stays published for verification until %s.\n%s.\n", rot.Kid, rot.Retired, until, held)
		if rot.Waiting > 0 || rot.SetAside > 0 {
			fmt.Fprintf(&out, "The entries waiting for the ledger, and those set aside, are to reach it before %s, when %s's period ends: "+
				"any still waiting then keep it published until they have, which ledgerd logs at ERROR.\n", until, rot.Retired)
		}
		for _, kid := range rot.Kept {
			fmt.Fprintf(&out, "retired key %s is past its period, but entries it signed still wait for the ledger: it stays in the key file, published until they have reached it.\n", kid)
		}
		for _, kid := range rot.Dropped {
			fmt.Fprintf(&out, "retired key %s is past its period: it left the key file and is no longer published.\n", kid)
		}
	}
	fmt.Fprintf(&out, "Back up the key file %s now: it holds the new key, and a restore without it breaks what the key signs.\nStart ledgerd to sign with the new key.\n", rot.KeyFile)
	_, err = io.WriteString(stdout, out.String())
	return err
}
