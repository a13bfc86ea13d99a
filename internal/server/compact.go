package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

// CompactReport is what Compact did.
type CompactReport struct {
	// Dropped is how many leaves of published full tiles left the file.
	Dropped int64
	// Leftovers is what became of the entries naming a row the file
	// does not store: removed, by bucket, or moved (a removed row's leaf
	// index) or kept (bolt.Store.DropLeftovers).
	Leftovers bolt.Leftovers
	// Before and After are the file's size in bytes.
	Before, After int64
	Took          time.Duration
}

// Compact is ledgerd compact, with ledgerd stopped: it brings the file
// to this version's layout (as ledgerd's start would), removes the
// index and lookup entries that name a row the file does not store
// (left by a removal before 2026-12-04's fix: docs/design/023), publishes the
// Merkle log's tiles not yet in write-once storage, drops from the bbolt
// file the leaves and stored hashes of every full tile there (each read
// back and compared first, as the integrator does), unless
// merkleLog.keepPublished is set,
// then copies the file without its free pages and puts the copy in its
// place. ledgerd running drops them no faster than its writes reuse the
// pages freed, so a file upgraded with a long log keeps most of it until
// this runs. progress, when not nil, is told how far it got in words.
func Compact(ctx context.Context, cfg config.Config, progress io.Writer) (CompactReport, error) {
	var rep CompactReport
	start := time.Now()
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Store.Kind == config.StorePostgres {
		return rep, errors.New("compact applies to a bbolt store; store.kind is postgres")
	}
	path := cfg.Store.Path
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("no bbolt file at %s (store.path)", path)
	}
	if err != nil {
		return rep, err
	}
	rep.Before = st.Size()
	// Opening the store brings the file to this version's layout first.
	store, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "looking for index entries of rows %s does not store\n", path)
	rep.Leftovers, err = store.DropLeftovers(ctx)
	if err == nil {
		if n := rep.Leftovers.Total(); n > 0 {
			fmt.Fprintf(progress, "removed %d entries naming rows that are gone: %s\n", n, leftoverWords(rep.Leftovers.Removed))
		}
		if l := rep.Leftovers; l.Moved > 0 || l.Kept > 0 {
			fmt.Fprintf(progress, "%d leaf indexes of rows that are gone moved to the log's index by id; %d left where they were, their row's id not known or in doubt\n", l.Moved, l.Kept)
		}
		rep.Dropped, err = dropPublished(ctx, cfg, store, progress)
	}
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, err
	}
	if h := afterCompactClose; h != nil {
		h(path)
	}
	opened, err := os.Stat(path)
	if err != nil {
		return rep, err
	}
	if !os.SameFile(st, opened) && rep.Dropped == 0 {
		// Bringing the file to this layout ended with the copy: a second
		// would copy the same pages again.
		fmt.Fprintf(progress, "%s was copied without its free pages when it was brought to this layout\n", path)
	} else {
		fmt.Fprintf(progress, "copying %s without its free pages\n", path)
		// A ledgerd started since the store closed holds the file: wait
		// for it no longer than an open does, and say so (ErrLocked).
		if err := bolt.CompactFile(path, compactLockWait); err != nil {
			return rep, fmt.Errorf("compact %s: %w", path, err)
		}
	}
	if st, err = os.Stat(path); err != nil {
		return rep, err
	}
	rep.After, rep.Took = st.Size(), time.Since(start)
	return rep, nil
}

// compactLockWait bounds Compact's wait for the file's lock, as ledgerd's
// open of the file is bounded (bolt.Config.OpenTimeout).
const compactLockWait = 5 * time.Second

// afterCompactClose, when set (tests), is called once Compact has closed
// the store and before it copies the file.
var afterCompactClose func(path string)

// dropPublished drops the published full tiles the file of store still
// holds, and returns how many leaves it dropped.
func dropPublished(ctx context.Context, cfg config.Config, store *bolt.Store, progress io.Writer) (int64, error) {
	if !cfg.MerkleLog.On() || cfg.MerkleLog.KeepPublished {
		fmt.Fprintln(progress, "the Merkle log is off or keeps its published tiles (merkleLog): no leaves to drop")
		return 0, nil
	}
	if _, err := os.Stat(cfg.LogKeyFile()); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(progress, "no Merkle log key at %s: the log never ran, no leaves to drop\n", cfg.LogKeyFile())
		return 0, nil
	}
	signer, vkey, _, err := config.EnsureLogKey(&cfg)
	if err != nil {
		return 0, err
	}
	objects, s3store, err := openEvidence(cfg)
	if err != nil {
		return 0, err
	}
	if s3store != nil {
		// The tiles are read back from the bucket before they leave the
		// file: it must answer.
		if err := s3store.Check(ctx); err != nil {
			return 0, fmt.Errorf("evidence store: %w", err)
		}
	}
	// Nothing is verified here; the ledger asks for a verifier and keys.
	v, err := verifier.New(verifier.Config{Audience: cfg.Audience, CheckedBy: CheckedBy()})
	if err != nil {
		return 0, err
	}
	keys, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{}), nil, nil)
	if err != nil {
		return 0, err
	}
	l, err := ledger.New(store, objects, v, keys, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	if err := l.EnableLog(ledger.LogConfig{Signer: signer, VerifierKey: vkey}); err != nil {
		return 0, err
	}
	if s, ok := objects.(fmt.Stringer); ok {
		fmt.Fprintf(progress, "the Merkle log's tiles are published to and read back from %s\n", s)
	}
	// ledgerd may have stopped between extending the log and publishing
	// its tiles: publishing is deterministic and idempotent. A store
	// that does not hold the log published so far (not the one ledgerd
	// runs with) is refused, by the publication and by the drop.
	if err := l.PublishTiles(ctx); err != nil {
		return 0, fmt.Errorf("publish the log's tiles not yet in evidence storage: %w%s", err, wrongStoreHint(err))
	}
	fmt.Fprintln(progress, "dropping the published tiles the file still holds, each read back from write-once storage first")
	last := time.Now()
	n, err := l.PruneAllPublished(ctx, func(dropped, of int64) {
		if time.Since(last) >= 5*time.Second || dropped == of {
			last = time.Now()
			fmt.Fprintf(progress, "  dropped %d of %d leaves\n", dropped, of)
		}
	})
	if err != nil {
		return n, fmt.Errorf("drop published tiles (%d leaves dropped first): %w%s", n, err, wrongStoreHint(err))
	}
	if n == 0 {
		fmt.Fprintln(progress, "  none: every published full tile had already left the file")
	}
	return n, nil
}

// wrongStoreHint is what compact adds to err when it wraps
// ledger.ErrPublishedLogMissing.
func wrongStoreHint(err error) string {
	if !errors.Is(err, ledger.ErrPublishedLogMissing) {
		return ""
	}
	return ". ledgerd compact takes the evidence store from the configuration's evidence block, or --evidence-dir: give it the one ledgerd runs with (nothing was dropped from the file)"
}

// leftoverWords lists l's buckets with their counts, in name order.
func leftoverWords(l map[string]int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, fmt.Sprintf("%d in %s", l[name], name))
	}
	return strings.Join(parts, ", ")
}
