package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/storage/bolt"
)

// compactUsage heads `ledgerd compact --help`.
const compactUsage = `usage: ledgerd compact [--config FILE] [--data-dir DIR] [--evidence-dir DIR]

With ledgerd stopped: bring the bbolt file to this layout, drop the
published tiles it still holds and copy it without its free pages.
Give it the configuration, or the flags, ledgerd runs with: the tiles
are published to and read back from that evidence store before they
leave the file, and one that does not hold the log ledgerd published
is refused.

flags:
`

// compact runs `ledgerd compact [--config FILE] [--data-dir DIR]
// [--evidence-dir DIR]`, with
// ledgerd stopped: the published tiles the bbolt file still holds leave
// it, and the file is copied without its free pages.
func compact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledgerd compact", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "read the YAML configuration in `FILE` (the one ledgerd runs with)")
	dataDir := fs.String("data-dir", "", "the data directory is `DIR` (default ./data)")
	evidenceDir := fs.String("evidence-dir", "", "the evidence is kept in the local `DIR` (selects evidence type dir), as ledgerd's --evidence-dir")
	if err := parseFlags(fs, args, compactUsage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (usage: ledgerd compact [--config FILE] [--data-dir DIR] [--evidence-dir DIR])", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *evidenceDir != "" {
		cfg.Evidence.Type, cfg.Evidence.Dir = "dir", *evidenceDir
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	level, err := cfg.Log.SlogLevel()
	if err != nil {
		return err
	}
	jsonLog(stderr, level) // the store logs what it does, as under ledgerd
	rep, err := server.Compact(ctx, cfg, stdout)
	if errors.Is(err, bolt.ErrLocked) {
		return fmt.Errorf("%w: stop ledgerd first (compact needs the file to itself)", err)
	}
	if err != nil {
		return err
	}
	if _, err = fmt.Fprintf(stdout, "done in %s: %d leaves of published tiles left the file, %d entries of rows that are gone were removed and %d of their leaf indexes moved; %s went from %s to %s\n",
		rep.Took.Round(1e6), rep.Dropped, rep.Leftovers.Total(), rep.Leftovers.Moved, cfg.Store.Path, mib(rep.Before), mib(rep.After)); err != nil {
		return err
	}
	if rep.Before-rep.After < bolt.GrowStep {
		what := "did not shrink"
		if rep.After < rep.Before {
			what = "shrank little"
		}
		_, err = fmt.Fprintf(stdout, "the file %s: bbolt grows a file %d MiB at a time past the pages it uses, and the copy was made the same way, so compacting frees only the free pages beyond those %d MiB; a small or young file (a new ledger's is %d MiB) keeps about its size, or grows a little. Nothing is wrong.\n",
			what, bolt.GrowStep>>20, bolt.GrowStep>>20, bolt.GrowStep>>20)
	}
	return err
}

// mib is n bytes in MiB, in words.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
